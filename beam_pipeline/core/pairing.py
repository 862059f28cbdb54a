"""Turning discovered files and listing rows into PairRefs, joined by key.

Pairs are never formed by sorted position: an image and its mask meet on a
key (the mask path the image's template renders), so a missing file leaves
one orphan and shifts nothing else.
"""

import posixpath
from typing import Iterable, Iterator, Optional, Sequence, Tuple, Union

from beam_pipeline.core import paths, reasons
from beam_pipeline.core.records import REJECTED, Outcome, PairRef


def _text(value) -> Optional[str]:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def row_to_pair(row: dict, root: str, task: str,
                allow_outside_root: bool) -> Tuple[Optional[PairRef], Optional[Outcome]]:
    """One listing row as a PairRef, or as a rejection (missing values, path outside the root)."""
    image = _text(row.get("image"))
    second_column = "mask" if task == "segmentation" else "label"
    second = _text(row.get(second_column))
    if image is None or second is None:
        missing = "image" if image is None else second_column
        return None, Outcome(REJECTED, reasons.BAD_LISTING_ROW, f"row has no {missing} value",
                             key=f"{image}|{second}", image=image,
                             mask=second if task == "segmentation" else None,
                             label=second if task == "classification" else None)
    image_path, image_inside = paths.resolve_under_root(root, image)
    mask_path, mask_inside = (paths.resolve_under_root(root, second) if task == "segmentation" else (None, True))
    key = image if task == "classification" else f"{image}|{second}"
    if not allow_outside_root and not (image_inside and mask_inside):
        outside = image if not image_inside else second
        return None, Outcome(REJECTED, reasons.PATH_OUTSIDE_ROOT,
                             # The detail keeps "manifest folder": rejects files are compared across versions.
                             f"{outside!r} leaves the manifest folder {root} (allow with --allow_outside_root)",
                             key=key, image=image_path, mask=mask_path,
                             label=second if task == "classification" else None)
    metadata = tuple((name, value) for name, value in row.items() if name not in ("image", "mask", "label"))
    return PairRef(key=key, source_id=paths.relative_to(root, image_path) or image, image=image_path,
                   mask=mask_path, label=second if task == "classification" else None,
                   metadata=metadata), None


def bad_listing_row(text: str, problem: str) -> Outcome:
    """A line of the listing that is not a row (a wrong number of values, invalid JSON): a rejection
    whose key is the line itself, so that it is reported once and the same on every run."""
    return Outcome(REJECTED, reasons.BAD_LISTING_ROW, f"not a listing row ({problem}): {text[:200]}",
                   key=f"line:{text}", image=None)


def pair_by_mask_path(mask_rel: str, image_rels: Iterable[str], mask_rels: Iterable[str],
                      root: str) -> Iterator[Union[PairRef, Outcome]]:
    """Join the images whose template renders ``mask_rel`` with the mask found there.

    Yields a PairRef per image when the mask exists, an ``orphan_image``
    Outcome per image when it does not, and an ``orphan_mask`` Outcome when a
    mask has no image.
    """
    images = sorted(set(image_rels))
    found = sorted(set(mask_rels))
    mask_path = paths.join(root, mask_rel)
    if not images:
        for rel in found:
            yield Outcome(REJECTED, reasons.ORPHAN_MASK, "no image renders this mask path",
                          key=f"|{rel}", image=None, mask=paths.join(root, rel))
        return
    for image_rel in images:
        image_path = paths.join(root, image_rel)
        if not found:
            yield Outcome(REJECTED, reasons.ORPHAN_IMAGE, f"no mask at {mask_rel}",
                          key=f"{image_rel}|{mask_rel}", image=image_path, mask=mask_path)
            continue
        folder = posixpath.basename(posixpath.dirname(image_rel))
        yield PairRef(key=f"{image_rel}|{mask_rel}", source_id=image_rel, image=image_path,
                      mask=mask_path, metadata=(("folder", folder),))


def class_folder_ref(relpath: str, root: str) -> PairRef:
    """An image in ``<class>/<file>``: its label is the folder name."""
    folder = posixpath.dirname(relpath)
    return PairRef(key=relpath, source_id=relpath, image=paths.join(root, relpath),
                   label=posixpath.basename(folder), metadata=(("folder", folder),))


def class_folder_classes(found: Sequence[str], root: str, num_classes: Optional[int] = None,
                         class_names: Tuple[str, ...] = ()) -> Tuple[str, ...]:
    """The classes of a one-folder-per-class input, in id order: ``class_names`` when given, else the sorted
    names of the class folders ``found`` under ``root``. Raises ValueError with one line when there is no
    class folder, or when ``class_names`` or ``num_classes`` does not match the folders (both numbers named)."""
    names = tuple(sorted(found))
    listed = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
    if not names:
        raise ValueError(f"no class folders in {root}: give one folder per class, each holding its images "
                         f"(e.g. {paths.join(root, 'pizza/1.jpg')})")
    if class_names:
        if len(class_names) != len(names):
            raise ValueError(f"--class_names lists {len(class_names)} names but {root} has {len(names)} class "
                             f"folders ({listed})")
        twice = sorted({name for name in class_names if class_names.count(name) > 1})
        if twice:
            raise ValueError(f"--class_names lists {', '.join(map(repr, twice))} more than once")
        unknown = [name for name in class_names if name not in names]
        if unknown:
            raise ValueError(f"--class_names names {', '.join(map(repr, unknown))}, which {root} has no class "
                             f"folder for (its class folders: {listed})")
    if num_classes is not None and num_classes != len(names):
        raise ValueError(f"--num_classes is {num_classes} but {root} has {len(names)} class folders ({listed}); "
                         "leave --num_classes out to use the number of class folders")
    return tuple(class_names) or names
