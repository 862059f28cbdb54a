"""The files a shard's writer keeps beside the shard: its keys file (core/rerun/versions.py) and its part of the
class index. Each is written while the shard is, line by line, with its size and SHA-256 taken as it goes;
neither crosses a shuffle, and a later version that keeps the shard keeps them too. Beside them, the tally of the
shard's live records, from which its ShardInfo is built (the writer's shards and those a re-run adopts)."""

import json
from typing import Optional, Tuple

from beam_pipeline.core import digests, layout, paths
from beam_pipeline.core.rerun import versions
from beam_pipeline.core.failures import write_failed
from beam_pipeline.core.records import ShardInfo, ShardTally, ValidPair
from beam_pipeline.core.selection import TRAIN
from beam_pipeline.io import streams

KEYS_DIR = "keys"                # runs/<run_id>/keys/<shard name>.tsv
CLASS_INDEX_DIR = "class_index"  # runs/<run_id>/class_index/<shard name>.jsonl


class LinesFile:
    """A text file written a line at a time, created on the first line; ``close()`` gives its files entry."""

    def __init__(self, path: str):
        self.path = path
        self._handle = None
        self._digest = digests.StreamDigest()

    def write(self, line: str) -> None:
        if self._handle is None:
            self._handle = streams.create_for_write(self.path)
        data = line.encode("utf-8")
        self._handle.write(data)
        self._digest.update(data)

    def close(self) -> Optional[dict]:
        """Close the file; its ``{"bytes", "sha256"}``, or None when no line was written."""
        if self._handle is None:
            return None
        try:
            self._handle.close()
        except OSError as error:
            raise write_failed(self.path, error) from error
        return self._digest.entry()


def class_index_line(pair: ValidPair, shard: str, record: int, cls: int) -> str:
    """One line of the class index: a train record (``shard``: its path in the manifest) holding class ``cls``."""
    return json.dumps({"class": cls, "shard": shard, "record": record, "source_id": pair.ref.source_id,
                       "copy": pair.copy}, sort_keys=True) + "\n"


DELETED_KEY = "-"               # a deleted record's key and content in its keys file: never matched


def content_of(pair: ValidPair) -> str:
    """The record's content digest (core/rerun/versions.record_content) as its shard's keys file holds it."""
    return versions.record_content(pair.content_key, pair.ref.source_id, pair.ref.split, pair.shard_group)


class ShardSideFiles:
    """What a shard's maker keeps beside it, record by record in file order: its keys file, its part of the
    class index, and the tally of its live records (the writer's shards, and the shards a re-run adopts);
    :meth:`info` closes the files and gives the shard's ShardInfo."""

    def __init__(self, data_dir: str, version: str, name: str, num_classes: int):
        self.shard_path = layout.in_version(version, name)          # as the manifest names it
        self._version, self._name = version, name
        self._keys = LinesFile(paths.join(data_dir, f"{KEYS_DIR}/{name}.tsv"))
        self._class_index = LinesFile(paths.join(data_dir, f"{CLASS_INDEX_DIR}/{name}.jsonl"))
        self.tally = ShardTally(num_classes)
        self.records = 0

    def add(self, pair: ValidPair, framed_bytes: int) -> None:
        """The next record, of ``pair``, ``framed_bytes`` long."""
        self._keys.write(versions.keys_line(versions.record_key(pair.shard_key), content_of(pair), framed_bytes))
        if pair.ref.split == TRAIN:
            for cls in pair.present_classes:
                self._class_index.write(class_index_line(pair, self.shard_path, self.records, cls))
        self.records += 1
        self.tally.add(pair, framed_bytes)

    def add_deleted(self, framed_bytes: int) -> None:
        """The next record, one the version does not hold."""
        self._keys.write(versions.keys_line(DELETED_KEY, DELETED_KEY, framed_bytes))
        self.records += 1

    def info(self, group: str, split: str, *, bytes: int, sha256: str, deleted: Tuple[int, ...] = (),
             stratum: int = -1) -> ShardInfo:
        """Close the side files; the shard's ShardInfo (core/records.ShardTally.info)."""
        return self.tally.info(self.shard_path, group, split, records=self.records, bytes=bytes, sha256=sha256,
                               side_files=self._close(), deleted=deleted, stratum=stratum)

    def _close(self) -> Tuple[str, str, Tuple[Tuple[str, int, str], ...]]:
        """(keys file, class index part, their (path, bytes, sha256)), paths as manifests name them; a file with no
        line is not made, and is ""."""
        named, files = [], []
        for folder, suffix, lines in ((KEYS_DIR, ".tsv", self._keys), (CLASS_INDEX_DIR, ".jsonl", self._class_index)):
            entry = lines.close()
            path = layout.in_version(self._version, f"{folder}/{self._name}{suffix}") if entry else ""
            named.append(path)
            if entry:
                files.append((path, entry["bytes"], entry["sha256"]))
        return named[0], named[1], tuple(files)
