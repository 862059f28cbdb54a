"""COCO annotation files read without loading them (core/coco.py says what they mean): streamed with ijson's C
backend, a record at a time, through Beam's filesystems (local, gs://, s3://).

* :func:`records` streams one file's ``images`` or ``annotations`` array: the pipeline reads the two in parallel, a
  pass over the file each, and groups them by image (stages/annotations.py); no process holds the file.
* :func:`read_categories` gives the categories at launch from the file's **tail**: ``json.dump`` writes a dict's
  keys in order, and COCO's files end with ``"categories": [...]}``, so the last 64 KiB (doubled up to 16 MiB)
  hold them, one ranged read. A file that ends otherwise is streamed until its categories have been read (the
  whole file when they are last). docs/benchmarks.md gives both costs.
* :func:`sniff` tells a COCO file from a JSON-lines listing named ``.json`` by its first key.

A file that is not JSON, or ends inside a value, is one line naming it (CocoError); in a worker, the error's text
holds ``cannot read the annotation file '<path>'`` (core/failures.py makes it the run's one line).
"""

import collections
import dataclasses
import json
import time
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import ijson
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import coco, paths, reasons
from beam_pipeline.core.coco import CocoError
from beam_pipeline.core.records import REJECTED, Outcome, PairRef
from beam_pipeline.io import folders, streams

TAIL_FIRST = 64 * 1024
TAIL_MOST = 16 * 1024 * 1024
IMAGES, ANNOTATIONS = "images", "annotations"
_SNIFF_BYTES = 64 * 1024
_JSON_ERRORS = (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError, ValueError)


def _open(path: str):
    return FileSystems.open(path, compression_type="uncompressed")


def records(path: str, array: str, kind: str) -> Iterator[Tuple[object, Tuple[str, object]]]:
    """``(image id, (core.coco.IMAGE or ANNOTATION, fields))`` of every entry of the file's ``images`` or
    ``annotations`` array, streamed; raises IOError naming the file when it is not JSON to its end."""
    tag = coco.IMAGE if array == IMAGES else coco.ANNOTATION
    try:
        with _open(path) as handle:
            for item in ijson.items(handle, f"{array}.item", use_float=True):
                found = coco.image_record(item) if array == IMAGES else coco.annotation_record(item, kind)
                if found is not None:
                    yield found[0], (tag, found[1])
    except _JSON_ERRORS as error:
        raise IOError(f"cannot read the annotation file '{path}': it is not valid JSON ({_first_line(error)}); "
                      "download it again") from None


def _first_line(error: BaseException) -> str:
    text = str(error)
    return text.splitlines()[0][:200] if text else type(error).__name__


def size_of(path: str) -> int:
    for _, size in folders.match_files(path):
        return size
    raise CocoError(f"annotation file not found: {path}")


def read_categories(path: str) -> Tuple[list, str]:
    """(the file's categories, how they were read and what it cost, for the log); raises CocoError."""
    started = time.perf_counter()
    size = size_of(path)
    length = min(TAIL_FIRST, size)
    while True:
        (tail,) = streams.read_ranges(path, size - length, (length,))
        found = categories_in_tail(tail)
        if found is not None:
            return found, f"from its last {length:,} bytes in {time.perf_counter() - started:.3f} s"
        if length >= min(TAIL_MOST, size):
            break
        length = min(length * 2, TAIL_MOST, size)
    return streamed_categories(path), (f"streamed from its start ({size:,} bytes; its categories are not at its "
                                        f"end) in {time.perf_counter() - started:.1f} s")


def categories_in_tail(tail: bytes) -> Optional[list]:
    """The categories of a file ending in ``"categories": [...]}`` (nothing but white space after), or None."""
    start = tail.rfind(b'"categories"')
    while start >= 0:
        colon = tail.find(b":", start + len(b'"categories"'))
        if colon >= 0 and not tail[start + len(b'"categories"'):colon].strip():
            try:
                text = tail[colon + 1:].decode("utf-8")
                value, end = json.JSONDecoder().raw_decode(text.lstrip())
            except (UnicodeDecodeError, ValueError):
                value, end, text = None, 0, ""
            if isinstance(value, list) and text.lstrip()[end:].strip() == "}":
                return value
        start = tail.rfind(b'"categories"', 0, start)
    return None


def streamed_categories(path: str) -> list:
    """The top-level ``categories`` array, streamed; stops once it is read."""
    try:
        with _open(path) as handle:
            events = ijson.parse(handle, use_float=True)
            for prefix, event, value in events:
                if prefix == "categories" and event == "start_array":
                    return list(ijson.items(_Replay(prefix, event, value, events), "categories.item"))
    except _JSON_ERRORS as error:
        raise CocoError(f"{path} is not a complete JSON file ({_first_line(error)}): download it again") from None
    raise CocoError(f"{path} has no categories: a COCO annotation file lists them as "
                    '"categories": [{"id": 1, "name": "person"}, ...]')


class _Replay:
    """Parser events from ``categories``' start to its end, for ijson.items (which takes events, too)."""

    def __init__(self, prefix, event, value, events):
        self._first = (prefix, event, value)
        self._events = events

    def __iter__(self):
        yield self._first
        for prefix, event, value in self._events:
            yield prefix, event, value
            if prefix == "categories" and event == "end_array":
                return


def sniff(path: str) -> Optional[str]:
    """``coco`` when the file is one JSON object whose first key is COCO's (``info``, ``images``, ...: a container,
    where a listing's cells are values); None otherwise (a JSON-lines listing, another file)."""
    try:
        with _open(path) as handle:
            head = handle.read(_SNIFF_BYTES)
    except (OSError, ValueError):
        return None
    events = ijson.parse(_Chunk(head))
    try:
        first = [next(events) for _ in range(3)]
    except (StopIteration, *_JSON_ERRORS):
        return None
    (_, start, _), (_, key_event, key), (_, value_event, _) = first
    if start == "start_map" and key_event == "map_key" and key in coco.COCO_KEYS \
            and value_event in ("start_map", "start_array"):
        return "coco"
    return None


class _Chunk:
    def __init__(self, data: bytes):
        self._data = data

    def read(self, size: int = -1) -> bytes:
        data, self._data = (self._data, b"") if size < 0 else (self._data[:size], self._data[size:])
        return data


def annotation_files(root: str, globs: Tuple[str, ...]) -> List[str]:
    """The annotation files of the first glob that matches (relative to ``root``), in name order."""
    for pattern in globs:
        found = sorted(folders.relative_matches(root, pattern))
        if found:
            return found
    return []


def first_folder(root: str, candidates: Tuple[str, ...]) -> Optional[str]:
    """The first of ``candidates`` (relative to ``root``) that is a folder holding files."""
    for candidate in candidates:
        if folders.folder_exists(paths.join(root, candidate)):
            return candidate
    return None


# --------------------------------------------------------------------------
# --plan: the pairs without the pipeline's grouping
# --------------------------------------------------------------------------
def listed_pairs(root: str, annotations: coco.Annotations) -> Iterator[Union[PairRef, Outcome]]:
    """Every image's pair (without its drawing: :func:`with_drawings` adds it to the sample) or Outcome, as the
    pipeline finds them, from two passes over each file that keep the annotations' count per image id and the ids
    seen (integers, not annotations). An image listed twice is its pair and a rejected repeat here, one rejected
    input in the pipeline."""
    for file in annotations.files:
        path = paths.join(root, file.path)
        counts = collections.Counter(image_id for image_id, _ in records(path, ANNOTATIONS, annotations.kind))
        seen = set()
        for image_id, record in records(path, IMAGES, annotations.kind):
            if image_id in seen:
                yield Outcome(REJECTED, reasons.ANNOTATION_INVALID, f"image id {image_id}: listed again in images",
                              key=f"{coco.pair_key(file, image_id)}#again", image=None)
                continue
            seen.add(image_id)
            pending = [(coco.ANNOTATION, coco.PENDING)] * counts.pop(image_id, 0)
            yield coco.annotated_pair(root, annotations, file, image_id, [record] + pending)
        for image_id, count in counts.items():
            yield coco.annotated_pair(root, annotations, file, image_id, [(coco.ANNOTATION, coco.PENDING)] * count)


def with_drawings(root: str, annotations: coco.Annotations, refs: Sequence[PairRef]) -> List[PairRef]:
    """``refs`` (of :func:`listed_pairs`, selected) with their drawings: their images' records gathered from one
    more pass over each file (memory bounded by the sample)."""
    by_key = {ref.key: ref for ref in refs}
    out = []
    for file in annotations.files:
        groups: Dict[str, Tuple[object, list]] = {}
        wanted = {key for key in by_key if key.startswith(file.path + "#")}
        if not wanted:
            continue
        for array in (IMAGES, ANNOTATIONS):
            for image_id, record in records(paths.join(root, file.path), array, annotations.kind):
                key = coco.pair_key(file, image_id)
                if key in wanted:
                    groups.setdefault(key, (image_id, []))[1].append(record)
        for key, (image_id, found) in groups.items():
            made = coco.annotated_pair(root, annotations, file, image_id, found)
            if isinstance(made, PairRef):
                out.append(dataclasses.replace(by_key[key], mask=made.mask, drawing=made.drawing))
    return out
