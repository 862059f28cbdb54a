"""Public datasets' folders read as they ship (core/layouts.py declares them): split files streamed into pairs, and
the names a layout is recognised by. Through Beam's filesystems: local, gs:// and s3:// alike.

A split file is read a line at a time (never whole): each line names an image's stem, and its pair is the
layout's templates of that stem, in the split the file's name gives. No image or mask is opened here: a missing
one is rejected when its pair is checked (``missing_file``).
"""

import posixpath
from typing import Iterator, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import layouts, paths
from beam_pipeline.core.records import PairRef
from beam_pipeline.io import folders


def split_files(root: str, layout: layouts.Layout) -> Tuple[str, ...]:
    """The split files of ``layout`` under ``root`` to read (relative to it), in name order."""
    found = [relative for pattern in layout.split_files for relative in folders.relative_matches(root, pattern)]
    return layouts.split_file_names(found)


def _lines(path: str) -> Iterator[str]:
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        rest = b""
        while True:
            chunk = handle.read(1 << 20)
            if not chunk:
                break
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield line.decode("utf-8", errors="replace")
        if rest:
            yield rest.decode("utf-8", errors="replace")


def split_file_pairs(root: str, layout: layouts.Layout, relative: str) -> Iterator[PairRef]:
    """A PairRef per stem the split file ``relative`` lists, with its split (the file's stem) as metadata."""
    split = posixpath.splitext(posixpath.basename(relative))[0]
    for line in _lines(paths.join(root, relative)):
        stem = layouts.stem_of_line(line)
        if stem is None:
            continue
        image_rel = layout.image_template.format(stem=stem)
        mask_rel = layout.mask_template.format(stem=stem)
        yield PairRef(key=f"{image_rel}|{mask_rel}", source_id=image_rel, image=paths.join(root, image_rel),
                      mask=paths.join(root, mask_rel), metadata=(("split", split),))


def exists_under(root: str):
    """``exists(relative)`` for core/layouts.detect: a file, or a folder holding one, below ``root``; a glob that
    matches a file; one of globs joined by ``|``."""
    def exists(relative: str) -> bool:
        if "|" in relative:
            return any(exists(one) for one in relative.split("|"))
        path = paths.join(root, relative)
        if "*" in relative:
            return any(result.metadata_list for result in FileSystems.match([path], limits=[1]))
        return FileSystems.exists(path) or folders.folder_exists(path)
    return exists


def detect(root: str) -> Tuple[Optional[layouts.Layout], str]:
    """(the layout of ``root``, or of its one subfolder, and the folder it is in); (None, root) when none."""
    found = layouts.detect(exists_under(root))
    if found is not None:
        return found, root
    below = folders.subfolders(root) or []
    if len(below) == 1:
        inner = paths.join(root, below[0])
        found = layouts.detect(exists_under(inner))
        if found is not None:
            return found, inner
    return None, root


def class_names(root: str, layout: layouts.Layout) -> Tuple[str, ...]:
    """The class names a layout's file gives (labelme2voc's ``class_names.txt``: ``__ignore__`` first, which is
    the ignore label, then ``_background_`` and the classes, one a line); () without such a file."""
    if not layout.class_names_file:
        return ()
    path = paths.join(root, layout.class_names_file)
    if not FileSystems.exists(path):
        return ()
    names = [line.strip() for line in _lines(path) if line.strip()]
    return tuple(name for name in names if name != "__ignore__")
