"""Read what the report needs from a published output folder, through Beam's FileSystems.

Every read is bounded (see ``ReportLimits``): a few shards, a capped number of
bytes of rejects, thumbnails instead of images. Paths in the manifest are
relative to ``folder``; ``folder`` may be a local path, gs:// or s3://.
"""

import concurrent.futures
import functools
import io
import json
import logging
import os
from typing import Dict, Iterator, List, Optional

import numpy as np
from apache_beam.io.filesystems import FileSystems
from PIL import Image

from beam_pipeline.core import features, layout, paths
from beam_pipeline.report import data
from beam_pipeline.report.tfrecord import read_records

_LOG = logging.getLogger(__name__)
_DECODE_BATCH = 32
_RECORD_FEATURES = (features.IMAGE_SOURCE_ID, features.IMAGE_HEIGHT, features.IMAGE_WIDTH, features.REPEAT_COPY,
                    features.CLASS_PIXELS, features.IGNORE_PIXELS, features.CLASS_LABEL)
_ENCODED_FEATURES = (features.IMAGE_ENCODED, features.MASK_ENCODED)
_BYTES_FEATURES = {features.IMAGE_SOURCE_ID, *_ENCODED_FEATURES}


def read_json(path: str) -> dict:
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


def read_stats(output: str, manifest: dict) -> Optional[dict]:
    statistics = manifest.get("statistics") or {}
    name = statistics.get("stats_file")
    if not name:
        return None
    path = layout.resolve(output, manifest, name)
    return read_json(path) if FileSystems.exists(path) else None


def _lines(path: str, budget: List[int]) -> Iterator[str]:
    """The lines of a text file, charging their bytes to ``budget[0]`` and stopping when it is spent."""
    with FileSystems.open(path) as handle, io.BufferedReader(handle) as buffered:
        for raw in buffered:
            budget[0] -= len(raw)
            if budget[0] < 0:
                return
            yield raw.decode("utf-8")


def read_reject_examples(output: str, manifest: dict, limits: data.ReportLimits):
    """(examples by (status, reason), complete) from the rejects files listed in the manifest."""
    examples = data.RejectExamples(limits.reject_examples, data.expected_rejects(manifest))
    budget = [limits.max_reject_bytes]
    for name in manifest.get("rejects", []):
        for line in _lines(layout.resolve(output, manifest, name), budget):
            if examples.full():
                return dict(examples.rows), True
            if line.strip():
                examples.add(json.loads(line))
        if budget[0] < 0:
            _LOG.warning("report: stopped reading rejects after %d bytes", limits.max_reject_bytes)
            return dict(examples.rows), False
    return dict(examples.rows), True


def _column(batch, name: str) -> list:
    index = batch.schema.get_field_index(name)
    return batch.column(index).to_pylist() if index >= 0 else [None] * batch.num_rows


def _first(values, default=None):
    return values[0] if values else default


def _thumbnail(encoded: bytes, px: int) -> np.ndarray:
    with Image.open(io.BytesIO(encoded)) as image:
        image.draft("RGB", (px, px))  # JPEG decodes at a fraction of full size
        image = image.convert("RGB")
        # reducing_gap=1: shrink by the largest integer factor that stays above the size (a box filter), then
        # LANCZOS for the rest; about 4x cheaper than LANCZOS over the full image, within a level of it.
        image.thumbnail((px, px), Image.Resampling.LANCZOS, reducing_gap=1.0)
        return np.asarray(image)


def _mask_like(encoded: bytes, size) -> np.ndarray:
    with Image.open(io.BytesIO(encoded)) as mask:
        return np.asarray(mask.resize(size, Image.Resampling.NEAREST))


def _decoder(names):
    """A tf.Example decoder (tfx-bsl, no TensorFlow) of only the features ``names``: the others are skipped."""
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx_bsl.coders import example_coder
    schema = schema_pb2.Schema()
    for name in names:
        kind = schema_pb2.BYTES if name in _BYTES_FEATURES else schema_pb2.INT
        schema.feature.add(name=name, type=kind)
    return example_coder.ExamplesToRecordBatchDecoder(schema.SerializeToString())


class _Encoded:
    """One record (a serialized tf.Example), held by the gallery's items and decoded at most once."""
    __slots__ = ("example", "holders", "decoded")

    def __init__(self, example: bytes):
        self.example, self.holders, self.decoded = example, 0, None

    def size(self) -> int:
        return len(self.example) if self.decoded is None else 0

    def encoded(self, decoder) -> tuple:
        """(encoded image, encoded mask) of the record: its features, not yet its pixels."""
        batch = decoder.DecodeBatch([self.example])
        return tuple(_first(_column(batch, name)[0]) for name in (features.IMAGE_ENCODED, features.MASK_ENCODED))

    def keep(self, decoded: tuple) -> None:
        self.decoded, self.example = decoded, None


def _thumbnails(encoded: tuple, px: int, task: str) -> tuple:
    """(thumbnail RGB array, mask resized to it or None) of one record's encoded image and mask."""
    image, mask = encoded
    thumb = _thumbnail(image, px)
    return thumb, _mask_like(mask, (thumb.shape[1], thumb.shape[0])) if task == "segmentation" else None


class LazyGallery:
    """The gallery picker fed with encoded records: only the final picks are decoded, once per record.

    The picker's choice does not depend on pixels, so items keep their record's encoded bytes until
    ``result``. When what the held items keep exceeds ``max_pending_bytes`` (very large images), they
    are decoded on the spot and their bytes dropped, so memory stays bounded by that and the thumbnails.
    """

    def __init__(self, quota: int, thumbnail_px: int, task: str, max_pending_bytes: int):
        self._picker = data.GalleryPicker(quota)
        self._decoder = None                     # of the encoded image and mask, made at the first decode
        self._px, self._task, self._budget = thumbnail_px, task, max_pending_bytes
        self.pending = 0                         # encoded bytes the held items keep

    def _hold(self, source: _Encoded, change: int) -> None:
        source.holders += change
        if source.holders == (1 if change > 0 else 0):
            self.pending += change * source.size()

    def offer(self, record: dict, split: str, shard: str) -> None:
        """Give one original record (``_records``'s dict) to the picker for each class it holds."""
        source_id = record["source_id"]
        if self._task == "segmentation":
            classes = data.mask_shares(record["pixels"], record["ignore"])
            offers = [(c, share) for c, share in enumerate(classes) if record["pixels"][c] > 0]
        else:
            offers = [(record["label"], 0.0)]
        source = None
        for class_id, share in offers:
            if not self._picker.wants(class_id, share, source_id):
                continue
            source = source or _Encoded(record["example"])
            self._hold(source, +1)
            displaced = self._picker.add(data.GalleryItem(class_id, source_id, split, shard, record["height"],
                                                          record["width"], share, None, None, source))
            if displaced is not None:
                self._hold(displaced.source, -1)
        if self.pending > self._budget:
            self._decode(self._picker.held())
            self.pending = 0

    def _decode(self, items: List[data.GalleryItem]) -> None:
        """Each item's thumbnails, each record decoded once: on a thread a core, as Pillow's decoding and resizing
        let go of the GIL (the records' features are read here, by one tfx-bsl decoder)."""
        if self._decoder is None:
            self._decoder = _decoder(_ENCODED_FEATURES)
        sources = list({id(item.source): item.source for item in items if item.source.decoded is None}.values())
        threads = min(len(sources), os.cpu_count() or 1)
        if threads:
            thumbnails = functools.partial(_thumbnails, px=self._px, task=self._task)
            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                for first in range(0, len(sources), 2 * threads):      # a few records' features out at a time
                    chunk = sources[first:first + 2 * threads]
                    encoded = [source.encoded(self._decoder) for source in chunk]
                    for source, pair in zip(chunk, pool.map(thumbnails, encoded)):
                        source.keep(pair)
        for item in items:
            item.image, item.mask = item.source.decoded

    def result(self) -> Dict[int, List[data.GalleryItem]]:
        gallery = self._picker.result()
        self._decode([item for items in gallery.values() for item in items])
        for items in gallery.values():
            for item in items:
                item.source = None
        return gallery


def _records(batch, serialized: List[bytes]) -> Iterator[dict]:
    """The features of ``_RECORD_FEATURES`` per record, and the serialized record as ``example``."""
    columns = {
        "source_id": _column(batch, features.IMAGE_SOURCE_ID),
        "height": _column(batch, features.IMAGE_HEIGHT),
        "width": _column(batch, features.IMAGE_WIDTH),
        "copy": _column(batch, features.REPEAT_COPY),
        "pixels": _column(batch, features.CLASS_PIXELS),
        "ignore": _column(batch, features.IGNORE_PIXELS),
        "label": _column(batch, features.CLASS_LABEL),
    }
    for i in range(batch.num_rows):
        row = {name: values[i] for name, values in columns.items()}
        yield {"source_id": _first(row["source_id"], b"").decode("utf-8"), "height": _first(row["height"], 0),
               "width": _first(row["width"], 0), "copy": _first(row["copy"], 0), "example": serialized[i],
               "pixels": row["pixels"] or [], "ignore": _first(row["ignore"], 0),
               "label": _first(row["label"])}


def _batches(path: str, max_bytes: int, sample: data.ShardSample) -> Iterator[list]:
    batch: list = []
    with FileSystems.open(path) as handle, io.BufferedReader(handle, 1 << 20) as buffered:
        for record in read_records(buffered, max_bytes):
            sample.bytes_read += len(record)
            batch.append(record)
            if len(batch) == _DECODE_BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def sample_shards(output: str, manifest: dict, limits: data.ReportLimits):
    """(ShardSample, gallery) from a few shards chosen to show the rarest classes."""
    decoder = _decoder(_RECORD_FEATURES)  # not the images: only the gallery's picks need them
    task = manifest["task"]
    quota = data.per_class_quota(manifest["num_classes"], limits)
    shards = data.choose_shards(data.manifest_shards(manifest), data.rarest_first(manifest), quota,
                                limits.max_shards, limits.max_shard_bytes)
    gallery = LazyGallery(quota, data.thumbnail_size(manifest["num_classes"], limits), task,
                          limits.max_pending_bytes)
    sample = data.ShardSample()
    for shard in shards:
        remaining = limits.max_shard_bytes - sample.bytes_read
        if remaining <= 0:
            sample.complete = False
            break
        sample.shards.append(shard.path)
        read_before = sample.records
        deleted, index = set(shard.deleted), -1
        for serialized in _batches(layout.resolve(output, manifest, shard.path), remaining, sample):
            for record in _records(decoder.DecodeBatch(serialized), serialized):
                index += 1
                if index in deleted:                 # not in this version (docs/incremental.md)
                    continue
                sample.records += 1
                if record["copy"]:
                    continue
                sample.originals += 1
                sample.sizes[(record["width"], record["height"])] += 1
                gallery.offer(record, shard.split, shard.path)
        if sample.records - read_before < shard.records - len(deleted):
            sample.complete = False
    return sample, gallery.result()


def _located(output: str, manifest: dict, keys: set) -> Dict[str, tuple]:
    """{record key digest: (shard, byte offset, framed size)} of the live records whose key is in ``keys``, found in
    the shards' keys files (each line: key, content, framed size, in record order)."""
    found: Dict[str, tuple] = {}
    for entry in manifest.get("splits", {}).values():
        for shard in entry["shards"]:
            if len(found) == len(keys) or not shard.get("keys"):
                continue
            deleted, offset = set(shard.get("deleted") or ()), 0
            with FileSystems.open(layout.resolve(output, manifest, shard["keys"])) as handle:
                for index, line in enumerate(handle.read().decode("utf-8").splitlines()):
                    key, _, size = line.split("\t")
                    if key in keys and index not in deleted:
                        found[key] = (shard["path"], offset, int(size))
                    offset += int(size)
    return found


def _skip_to(handle, offset: int) -> None:
    """Move ``handle`` to ``offset``: a seek where the store's handle has one, else reading forward."""
    try:
        handle.seek(offset)
        return
    except (AttributeError, NotImplementedError, OSError, ValueError):   # io.UnsupportedOperation is both
        pass
    while offset > 0:
        chunk = handle.read(min(offset, 1 << 20))
        if not chunk:
            return
        offset -= len(chunk)


def _record_at(output: str, manifest: dict, where: tuple) -> bytes:
    shard, offset, size = where
    with FileSystems.open(layout.resolve(output, manifest, shard)) as handle:
        _skip_to(handle, offset)
        framed = handle.read(size)
    return framed[12:-4]                          # a TFRecord frame: length, its CRC, the record, its CRC


def read_near_pairs(output: str, manifest: dict, limits: data.ReportLimits) -> List[tuple]:
    """(pair, thumbnail a, thumbnail b) of the closest cross-split near-duplicate pairs the manifest names (its
    ``leakage`` section), read from the shards through their keys files; a pair whose records are not found is left
    out."""
    pairs = ((manifest.get("leakage") or {}).get("closest_cross_split") or [])[:limits.near_pairs]
    wanted = {key for pair in pairs for key in pair["keys"]}
    if not wanted:
        return []
    where = _located(output, manifest, wanted)
    decoder, shown = _decoder((features.IMAGE_ENCODED,)), []
    for pair in pairs:
        if all(key in where for key in pair["keys"]):
            thumbs = [_thumbnail(_first(_column(decoder.DecodeBatch([_record_at(output, manifest, where[key])]),
                                                features.IMAGE_ENCODED)[0]), limits.near_pair_px)
                      for key in pair["keys"]]
            shown.append((pair, *thumbs))
    return shown


def gather(manifest: dict, output: str, limits: data.ReportLimits = data.ReportLimits(),
           stats: Optional[dict] = None) -> data.ReportData:
    """Everything the report shows, read from the output folder ``output`` (core/layout.py resolves the
    manifest's paths)."""
    stats = stats if stats is not None else read_stats(output, manifest)
    rejects, rejects_complete = read_reject_examples(output, manifest, limits)
    sample, gallery = sample_shards(output, manifest, limits)
    return data.ReportData(manifest=manifest, stats=stats, class_names=data.class_names(manifest, stats),
                           rejects=rejects, rejects_complete=rejects_complete, sample=sample, gallery=gallery,
                           near_pairs=read_near_pairs(output, manifest, limits))
