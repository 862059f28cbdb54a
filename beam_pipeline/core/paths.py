"""Path arithmetic that works the same for local paths and ``scheme://`` URLs.

Beam's filesystems address files by strings such as ``/data/a.jpg``,
``gs://bucket/a.jpg`` or ``s3://bucket/a.jpg``. These helpers join, normalise
and relate such strings without touching any filesystem.
"""

import fnmatch
import posixpath
import re
from typing import Dict, Iterable, List, Optional, Tuple

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)(.*)$", re.DOTALL)


def split_scheme(path: str) -> Tuple[str, str]:
    """``("gs://", "bucket/a.jpg")`` for a URL, ``("", path)`` for a local path."""
    match = _SCHEME.match(path)
    if match:
        return match.group(1), match.group(2)
    return "", path


def normalise(path: str) -> str:
    scheme, rest = split_scheme(path)
    if not rest:
        return path
    return scheme + posixpath.normpath(rest)


def is_absolute(path: str) -> bool:
    scheme, rest = split_scheme(path)
    return bool(scheme) or rest.startswith("/")


def dirname(path: str) -> str:
    scheme, rest = split_scheme(path)
    return scheme + posixpath.dirname(rest)


def join(root: str, path: str) -> str:
    """``path`` resolved against the folder ``root`` (absolute paths win)."""
    if is_absolute(path):
        return normalise(path)
    scheme, rest = split_scheme(root)
    return normalise(scheme + posixpath.join(rest, path))


def relative_to(root: str, path: str):
    """``path`` relative to the folder ``root``, or None when it is not inside it."""
    root_n = normalise(root).rstrip("/")
    path_n = normalise(path)
    r_scheme, r_rest = split_scheme(root_n)
    p_scheme, p_rest = split_scheme(path_n)
    if r_scheme != p_scheme:
        return None
    if not r_rest:
        return p_rest.lstrip("/") or None
    prefix = r_rest + "/"
    if p_rest.startswith(prefix) and len(p_rest) > len(prefix):
        return p_rest[len(prefix):]
    return None


_NOT_PLAIN = re.compile(r"(^|/)\.{1,2}(/|$)|//|/$|^/|^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def resolve_under_root(root: str, path: str) -> Tuple[str, bool]:
    """Resolve a listing entry against the listing's folder.

    Returns the full path and whether it stays inside ``root``: an entry with
    ``..`` that climbs out, or an absolute path elsewhere, is outside. A plain
    relative path (no ``.`` or ``..`` part, no empty part, no scheme), which is
    nearly every row of a listing, is joined without normalising it again.
    """
    if path and root and not _NOT_PLAIN.search(path):
        root_n = normalise(root).rstrip("/")
        if root_n and not root_n.endswith("://"):
            return f"{root_n}/{path}", True
    full = join(root, path)
    return full, relative_to(root, full) is not None


def stem(path: str) -> str:
    name = posixpath.basename(split_scheme(path)[1])
    base, _ = posixpath.splitext(name)
    return base


def template_fields(relpath: str) -> Dict[str, str]:
    """Fields a mask template may use, taken from an image path relative to the root.

    For ``train/0001TP_006690.png``: ``stem`` is ``0001TP_006690``, ``name``
    ``0001TP_006690.png``, ``ext`` ``.png``, ``parent`` ``train``, ``reldir``
    ``train`` and ``relstem`` ``train/0001TP_006690``.
    """
    reldir, name = posixpath.split(relpath)
    base, ext = posixpath.splitext(name)
    return {
        "stem": base,
        "name": name,
        "ext": ext,
        "parent": posixpath.basename(reldir),
        "reldir": reldir,
        "relstem": posixpath.join(reldir, base) if reldir else base,
    }


TEMPLATE_FIELDS = tuple(template_fields("a/b.c"))
_FIELD = re.compile(r"\{([a-z]+)\}")


def check_template(template: str) -> None:
    """Raise ValueError naming the bad field when ``template`` uses an unknown one."""
    fields = _FIELD.findall(template)
    if not fields:
        raise ValueError(f"mask template {template!r} uses no field; use e.g. {{stem}}")
    for field in fields:
        if field not in TEMPLATE_FIELDS:
            raise ValueError(
                f"mask template {template!r} uses unknown field {{{field}}}; "
                f"known fields: {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}")


def render_template(template: str, relpath: str) -> str:
    """The mask path (relative to the root) that pairs with an image path."""
    fields = template_fields(relpath)
    return _FIELD.sub(lambda m: fields[m.group(1)], template)


def template_glob(template: str) -> str:
    """A glob that matches every path the template can render."""
    return _FIELD.sub("*", template)


def matches_any(relpath: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(relpath, pattern) for pattern in patterns)


_WILDCARD = re.compile(r"[*?\[]")


def fan_out_point(pattern: str) -> Optional[Tuple[str, str, str]]:
    """Where a glob can be listed one folder at a time: ``(folders before it, the first folder component
    with a wildcard, the rest)``, e.g. ``("images", "*", "*.png")`` for ``images/*/*.png``.

    None when the first wildcard is in the file name (``images/*.png``: one flat folder), or is ``**``
    (any depth), or there is none.
    """
    parts = pattern.split("/")
    for index, part in enumerate(parts[:-1]):
        if _WILDCARD.search(part):
            if "**" in part:
                return None
            return "/".join(parts[:index]), part, "/".join(parts[index + 1:])
    return None


def fanned_out(pattern: str, subfolders: Iterable[str]) -> List[str]:
    """``pattern`` once per subfolder its wildcard folder component matches (see :func:`fan_out_point`):
    together they match exactly the files ``pattern`` matches. A component's ``*`` matches within one
    name, as in Beam's glob."""
    before, component, rest = fan_out_point(pattern)
    prefix = f"{before}/" if before else ""
    return [f"{prefix}{name}/{rest}" for name in sorted(subfolders) if fnmatch.fnmatchcase(name, component)]
