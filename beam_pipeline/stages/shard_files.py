"""The files a shard's writer keeps beside the shard: its keys file (core/versions.py) and its part of the
class index. Each is written while the shard is, line by line, with its size and SHA-256 taken as it goes;
neither crosses a shuffle, and a later version that keeps the shard keeps them too."""

import json
from typing import Optional

from beam_pipeline.core import digests
from beam_pipeline.core.failures import write_failed
from beam_pipeline.core.records import ValidPair
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
