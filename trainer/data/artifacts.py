"""The pipeline's artifacts, as the trainer reads them: manifest.json, stats.json, shards, transform/.

The trainer never imports apache_beam: this module reads files only (through
``tf.io.gfile``, so local paths and ``gs://`` work alike). It opens
``manifest.json`` first and then only what it names: the version folder
(``data_dir``, e.g. ``runs/<run_id>/``) that holds stats.json, the shards it
names (in that folder, or in an earlier run's that the version keeps: every
path of a format-3 manifest is relative to the output folder), and the
tf.Transform output (``transform_dir``). trainer/data/verification.py checks
the files the manifest lists against their sizes and SHA-256.
"""

import dataclasses
import functools
import hashlib
import json
import posixpath
from typing import Dict, List, Optional, Tuple

import tensorflow as tf

MANIFEST = "manifest.json"
STATS = "stats.json"
TRANSFORM_DIR = "transform"          # where format-1 manifests (no transform_dir entry) keep it
OUTPUT_RELATIVE_FORMAT = 3           # manifests from this format on name every path relative to the output
_CHUNK = 8 * 1024 * 1024


class ArtifactError(ValueError):
    """The --data folder is not a complete, intact pipeline output."""


@dataclasses.dataclass(frozen=True)
class Artifacts:
    root: str
    manifest: dict
    manifest_sha256: str = ""                # of manifest.json's bytes: what a verification is recorded for

    @functools.cached_property
    def stats(self) -> Optional[dict]:
        """stats.json, read when first needed (after trainer/data/verification.py has checked it); None without it."""
        path = posixpath.join(self.data_dir, STATS)
        if not tf.io.gfile.exists(path):
            return None
        with tf.io.gfile.GFile(path, "r") as handle:
            return json.load(handle)

    @property
    def task(self) -> str:
        return self.manifest["task"]

    @property
    def num_classes(self) -> int:
        return self.manifest["num_classes"]

    @property
    def ignore_label(self) -> Optional[int]:
        return self.manifest.get("ignore_label")

    @property
    def class_names(self) -> List[str]:
        """The manifest's class names, or the ids as text when the pipeline was given none."""
        return list(self.manifest.get("class_names") or []) or [str(index) for index in range(self.num_classes)]

    @property
    def data_dir(self) -> str:
        """The version folder the manifest names; its paths are relative to it (the root for format 1)."""
        return _data_dir(self.root, self.manifest)

    @property
    def base(self) -> str:
        """Where the manifest's paths are relative to: the output folder (format 3 on), else its version folder."""
        return self.root if self.manifest.get("format_version", 1) >= OUTPUT_RELATIVE_FORMAT else self.data_dir

    def path_of(self, relative: str) -> str:
        """A path the manifest names (shards, the files table), where it is."""
        return posixpath.join(self.base, relative)

    @property
    def transform_dir(self) -> str:
        """The tf.Transform output the manifest names (relative to the root)."""
        named = self.manifest.get("transform_dir")
        if named:
            return posixpath.join(self.root, named)
        if "data_dir" in self.manifest:
            raise ArtifactError(f"{self.root}/{MANIFEST} names no tf.Transform output (the pipeline ran with "
                                "--no_stats)")
        return posixpath.join(self.root, TRANSFORM_DIR)

    def split(self, name: str) -> dict:
        if name not in self.manifest["splits"]:
            raise ArtifactError(f"split {name!r} is not in {self.root}/{MANIFEST} "
                                f"(splits: {', '.join(sorted(self.manifest['splits']))})")
        return self.manifest["splits"][name]

    def shard_paths(self, name: str) -> List[str]:
        return [self.path_of(shard["path"]) for shard in self.split(name)["shards"]]

    def deleted(self, name: str) -> Dict[str, Tuple[int, ...]]:
        """``{shard path: its deleted record indices}``: the records of a shard the version does not hold (a
        version keeps earlier runs' shards and marks their gone records: docs/incremental.md)."""
        return {self.path_of(shard["path"]): tuple(shard.get("deleted") or ()) for shard in self.split(name)["shards"]}

    def strata(self, name: str) -> List[Tuple[float, List[str]]]:
        """(sampling weight, shard paths) per stratum; empty when the split was not written in strata."""
        return [(stratum["weight"], [self.path_of(path) for path in stratum["shards"]])
                for stratum in self.split(name).get("strata", [])]


def _data_dir(root: str, manifest: dict) -> str:
    return posixpath.join(root, manifest["data_dir"]) if manifest.get("data_dir") else root


def load_artifacts(root: str) -> Artifacts:
    root = root.rstrip("/")
    manifest_path = posixpath.join(root, MANIFEST)
    if not tf.io.gfile.exists(manifest_path):
        raise ArtifactError(f"no {MANIFEST} in {root}: run the pipeline first (it writes the manifest last)")
    with tf.io.gfile.GFile(manifest_path, "rb") as handle:
        data = handle.read()
    return Artifacts(root=root, manifest=json.loads(data), manifest_sha256=hashlib.sha256(data).hexdigest())


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as handle:
        while True:
            chunk = handle.read(_CHUNK)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)
