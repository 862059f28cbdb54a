"""Stable hashing of example keys.

Python's ``hash()`` is salted per process, so it differs between workers and
runners. Every sampling, split and shard decision goes through these helpers,
which use a salted SHA-256 digest of the key instead.
"""

import hashlib

_SCALE = float(1 << 64)


def stable_hash(salt: str, key: str) -> int:
    """A 64-bit integer derived from ``salt`` and ``key`` only."""
    digest = hashlib.sha256(f"{salt}\x00{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def unit_interval(salt: str, key: str) -> float:
    """A number in [0, 1) derived from ``salt`` and ``key`` only."""
    return stable_hash(salt, key) / _SCALE


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
