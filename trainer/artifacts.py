"""The pipeline's artifacts, as the trainer reads them: manifest.json, stats.json, shards, transform/.

The trainer never imports apache_beam: this module reads files only (through
``tf.io.gfile``, so local paths and ``gs://`` work alike).
"""

import dataclasses
import hashlib
import json
import posixpath
from typing import List, Optional, Tuple

import tensorflow as tf

MANIFEST = "manifest.json"
STATS = "stats.json"
TRANSFORM_DIR = "transform"
_CHUNK = 8 * 1024 * 1024


class ArtifactError(ValueError):
    """The --data folder is not a complete, intact pipeline output."""


@dataclasses.dataclass(frozen=True)
class Artifacts:
    root: str
    manifest: dict
    stats: Optional[dict]

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
    def transform_dir(self) -> str:
        return posixpath.join(self.root, TRANSFORM_DIR)

    def split(self, name: str) -> dict:
        if name not in self.manifest["splits"]:
            raise ArtifactError(f"split {name!r} is not in {self.root}/{MANIFEST} "
                                f"(splits: {', '.join(sorted(self.manifest['splits']))})")
        return self.manifest["splits"][name]

    def shard_paths(self, name: str) -> List[str]:
        return [posixpath.join(self.root, shard["path"]) for shard in self.split(name)["shards"]]

    def strata(self, name: str) -> List[Tuple[float, List[str]]]:
        """(sampling weight, shard paths) per stratum; empty when the split was not written in strata."""
        return [(stratum["weight"], [posixpath.join(self.root, path) for path in stratum["shards"]])
                for stratum in self.split(name).get("strata", [])]


def load_artifacts(root: str) -> Artifacts:
    root = root.rstrip("/")
    manifest_path = posixpath.join(root, MANIFEST)
    if not tf.io.gfile.exists(manifest_path):
        raise ArtifactError(f"no {MANIFEST} in {root}: run the pipeline first (it writes the manifest last)")
    with tf.io.gfile.GFile(manifest_path, "r") as handle:
        manifest = json.load(handle)
    stats_path = posixpath.join(root, STATS)
    stats = None
    if tf.io.gfile.exists(stats_path):
        with tf.io.gfile.GFile(stats_path, "r") as handle:
            stats = json.load(handle)
    return Artifacts(root=root, manifest=manifest, stats=stats)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as handle:
        while True:
            chunk = handle.read(_CHUNK)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)


def verify_shards(artifacts: Artifacts, split: str) -> int:
    """Check every shard of ``split`` against the manifest's size and SHA-256; returns the bytes checked."""
    checked = 0
    for shard in artifacts.split(split)["shards"]:
        path = posixpath.join(artifacts.root, shard["path"])
        if not tf.io.gfile.exists(path):
            raise ArtifactError(f"shard listed in the manifest is missing: {path}")
        size = tf.io.gfile.stat(path).length
        if size != shard["bytes"]:
            raise ArtifactError(f"shard {path} has {size} bytes, the manifest says {shard['bytes']}")
        if file_sha256(path) != shard["sha256"]:
            raise ArtifactError(f"shard {path} does not match its SHA-256 in the manifest")
        checked += size
    return checked
