"""The verdict cache's rules, pure: what a verdict is, what it is keyed by, and when one may be reused.

A pair's verdict (its ValidPair without the paths, or the reason its content is rejected) is a
function of its files' bytes, its label, its key (the crop sample points are drawn from a stable hash
of the key) and of everything that can change a check: the check options, the decoders' versions and
the rules' own version (:data:`RULES_VERSION`, raised with any change to core/pixels.py, decode.py,
images.py, masks/, validation.py or points.py that can change a verdict). The options, versions and rules
make the cache's :func:`fingerprint`: verdicts of another fingerprint are never read.

A verdict is reused:

* without reading the files, when both files' *versions* (a cheap pre-key: size, mtime_ns, inode and
  ctime_ns of a local file; size, generation and CRC32C on gs://; size, ETag and VersionId on s3://;
  io/streams.py ``file_version``) are the ones it was taken with;
* after reading and hashing the files, when their SHA-256 are the ones it was taken with (a file
  touched but unchanged, a pre-key the store cannot give, ``--revalidate``, or an audited hit);
* never otherwise: the pair is validated afresh.

Only content verdicts are kept: a missing, unreadable, empty or oversized file is checked again on
every run. Verdicts are kept per bucket of the key (:func:`bucket_of`), the newest entry of a key wins.
"""

import dataclasses
import hashlib
import json
from typing import Dict, Iterable, Optional, Tuple

from beam_pipeline.core.hashing import stable_hash, unit_interval
from beam_pipeline.core.records import ValidPair

RULES_VERSION = 4             # 2: label and colour maps, --reduce_zero_label, 16-bit and TIFF masks (issue 26);
                              # 3: greyscale JPEGs kept as they are, not converted to RGB PNG (issue 42);
                              # 4: every image's perceptual hash kept with its verdict (issue 43)
NUM_BUCKETS = 1024
VERDICTS_PER_PART = 2000      # a bucket's writer commits a part (and its spill) at least this often
BUCKET_SALT = "verdicts"
AUDIT_SALT = "audit"
DECODER_PACKAGES = ("imagecodecs", "simplejpeg", "pillow", "numpy")

REUSE = "reuse"            # the files' versions are the verdict's: reuse it without reading them
REHASH = "rehash"          # read and hash the files: reuse the verdict if their digests are its own
VALIDATE = "validate"      # no verdict for this pair (or another label): validate it


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One pair's verdict, as the cache keeps it."""
    key: str
    label: Optional[str]                       # classification: the label as the input gave it
    image_version: Optional[str]               # the files' versions when the verdict was taken (None: unknown)
    mask_version: Optional[str]
    image_sha256: str
    mask_sha256: str
    valid: bytes = b""                         # core.records.pack of the ValidPair with ``ref=None``
    rejection: Tuple[str, str] = ()            # (reason, detail) of a pair rejected for its content


def _field_names(cls) -> list:
    return [field.name for field in dataclasses.fields(cls)]


def fingerprint(check_options: dict, versions: Dict[str, str]) -> str:
    """16 hex digits naming the rules a verdict was taken under: the check options (a JSON-ready dict),
    the decoders' package versions, RULES_VERSION and the fields of the records kept (a verdict is
    stored as its fields' values, in order)."""
    decoders = {name: versions.get(name, "") for name in DECODER_PACKAGES}
    text = json.dumps({"options": check_options, "decoders": decoders, "rules": RULES_VERSION,
                       "records": [_field_names(Verdict), _field_names(ValidPair)]}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def bucket_of(key: str) -> int:
    return stable_hash(BUCKET_SALT, key) % NUM_BUCKETS


def audited(key: str, run_id: str, fraction: float) -> bool:
    """Whether this run re-hashes this pair's files although their versions match (``--cache_audit``):
    a share ``fraction`` of the pairs, drawn anew by every run."""
    return fraction > 0 and unit_interval(AUDIT_SALT, f"{run_id}:{key}") < fraction


def decide(verdict: Optional[Verdict], label: Optional[str], versions: Tuple[Optional[str], Optional[str]],
           revalidate: bool, audit: bool) -> str:
    """REUSE, REHASH or VALIDATE for a pair whose files have ``versions`` now (None: unknown or missing)."""
    if verdict is None or verdict.label != label:
        return VALIDATE
    image_version, mask_version = versions
    if revalidate or audit or image_version is None or (verdict.mask_sha256 and mask_version is None):
        return REHASH                          # asked to, or a version the store cannot give
    if versions != (verdict.image_version, verdict.mask_version):
        return REHASH                          # touched, moved or rewritten: the digests decide
    return REUSE


def same_content(verdict: Verdict, image_sha256: str, mask_sha256: str) -> bool:
    return (verdict.image_sha256, verdict.mask_sha256) == (image_sha256, mask_sha256)


def newest(verdicts: Iterable[Verdict]) -> Dict[str, Verdict]:
    """``{key: verdict}``, a later verdict of a key replacing an earlier one (parts are read oldest first)."""
    table: Dict[str, Verdict] = {}
    for verdict in verdicts:
        table[verdict.key] = verdict
    return table
