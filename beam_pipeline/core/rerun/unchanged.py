"""When a re-run has nothing to do, the pure rules (docs/incremental.md, "Nothing changed"): no Beam, no TensorFlow.

A version records what it was made of (manifest.json's ``lineage.inputs``):

* ``pairs`` and ``digest``: every pair that reached validation, each as a token of its key, its label and its
  files' versions (the pre-keys the verdict cache takes: io/streams.py ``file_version``), the tokens summed. A sum
  is the same in any order, so every worker adds its bundles' and Beam's combiner adds those (ValidatePairs); the
  launcher's check adds the same tokens as it streams the input, holding one sum.
* ``listing``: the listing file's own version (None for folders), ``code``: the SHA-256 of this package's files
  (its source and shipped mask maps).

A re-run with the same command then publishes nothing when all of these hold: its dataset options
(:func:`dataset_options`: every option but those that never change a published byte) and package versions are
the version's, so is the code, so is the listing's version, every file the version publishes is there and
unchanged, and the pairs it would validate, with their files' versions, sum to the same digest, with the same
counts of inputs discovered and filtered out. Anything else runs the pipeline, which writes only what changed.
"""

import hashlib
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

PARTS = 4                                      # the digest's sums: PARTS numbers of PART_BITS bits per token ...
PART_BITS = 31                                 # ... so each sum stays within Beam's signed 64-bit integers up to
DIGEST_KEYS = tuple(f"inputs_{i}" for i in range(PARTS))  # 2**32 pairs; ValidatePairs emits them as (key, sum)
TOKEN_SALT = "unchanged"

SKIP_AUTO, SKIP_ALWAYS, SKIP_NEVER = "auto", "always", "never"
# Where --skip_unchanged auto checks in the launcher: the most pairs whose files it looks at, one version each (a
# stat locally; a metadata request on gs:// and s3://, several at once), before it would rather let the runner's
# workers do it. Locally the look took 0.8 s at 20,000 pairs with a cold page cache (docs/benchmarks.md, "Nothing
# changed"), so about 80 s at the limit; on a store the limit is an estimate (tens of milliseconds a request).
LAUNCHER_MAX_PAIRS = {"local": 2_000_000, "remote": 100_000}

# Options that never change a byte the version publishes: where and how the job runs, the cache's place, what a
# later run keeps, and what a damaged parent would make a re-run do (the check refuses a damaged one anyway). The
# output's own path is one: the version's paths are relative to it, and its files are looked at where they are.
OPERATIONAL = frozenset({
    "output", "overwrite", "keep_versions", "shuffle", "cache_dir", "spill", "on_damaged_parent", "runner",
    "near_duplicates_one_worker_pairs", "skip_unchanged",
})


def pair_token(key: str, label, versions: Sequence[Optional[str]]) -> Tuple[int, ...]:
    """One selected pair's part of the digest: PARTS numbers of PART_BITS bits from its key, label and versions."""
    text = "\x00".join((TOKEN_SALT, key, "" if label is None else str(label),
                        *("-" if version is None else version for version in versions)))
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return tuple(int.from_bytes(digest[4 * i:4 * i + 4], "big") >> (32 - PART_BITS) for i in range(PARTS))


class Tally:
    """Tokens summed: ``add`` each pair's, then ``sums`` (what ValidatePairs emits) or ``digest``."""

    def __init__(self):
        self.sums = [0] * PARTS
        self.pairs = 0

    def add(self, token: Sequence[int]) -> None:
        self.pairs += 1
        for i, part in enumerate(token):
            self.sums[i] += part

    def items(self) -> List[Tuple[str, int]]:
        """``(key, sum)`` for the lineage's combiner; none without a pair."""
        return list(zip(DIGEST_KEYS, self.sums)) if self.pairs else []

    def digest(self) -> str:
        return digest_of(self.sums)


def digest_of(sums: Sequence[int]) -> str:
    """The recorded digest of the summed tokens."""
    return hashlib.sha256(":".join(str(total) for total in sums).encode("ascii")).hexdigest()[:32]


def inputs_entry(settled: Mapping[str, int]) -> dict:
    """manifest.json's ``lineage.inputs`` from the run's ``(how, n)`` totals (its pairs and their tokens' sums)."""
    pairs = sum(settled.get(how, 0) for how in ("validated", "from_cache", "rehashed"))
    return {"pairs": pairs, "digest": digest_of([settled.get(key, 0) for key in DIGEST_KEYS])}


def dataset_options(options: Mapping[str, object]) -> Dict[str, object]:
    """The options a version's bytes may depend on: all but the OPERATIONAL ones."""
    return {name: value for name, value in options.items() if name not in OPERATIONAL}


def moved_options(before: Mapping[str, object], now: Mapping[str, object]) -> List[str]:
    """The dataset options whose value differs (JSON-normalised both), sorted."""
    before, now = dataset_options(before), dataset_options(now)
    return sorted(name for name in set(before) | set(now) if before.get(name) != now.get(name))


def launcher_limit(remote: bool) -> int:
    return LAUNCHER_MAX_PAIRS["remote" if remote else "local"]


def why_not_checked(mode: str, parent: Optional[dict], use_cache: bool, revalidate: bool, audit: float,
                    max_examples: Optional[int], streamable: bool, remote: bool) -> Optional[str]:
    """Why this re-run cannot skip without running (a phrase), or None when the launcher may check. ``streamable``:
    the input is found without a join (a listing, class folders, a layout's split files)."""
    if mode == SKIP_NEVER:
        return "--skip_unchanged never"
    if parent is None:
        return "no version is published"
    if not use_cache or revalidate or audit > 0:
        return "--no_cache, --revalidate or --cache_audit asks for a look at the files"
    if max_examples is not None:
        return "--max_examples ranks the whole input"
    if not streamable:
        return "the input's pairs are joined (paired folders, annotation files)"
    recorded = (parent.get("lineage") or {}).get("inputs")
    if not recorded or "code" not in recorded:
        return "the published version does not record its inputs"
    if mode == SKIP_AUTO and recorded["pairs"] > launcher_limit(remote):
        return (f"the published version holds {recorded['pairs']:,} pairs, more than the launcher checks "
                f"({launcher_limit(remote):,}; --skip_unchanged always checks all the same)")
    return None


def what_moved(parent: dict, options: Mapping[str, object], versions: Mapping[str, str], code: str,
               listing: Optional[str]) -> Optional[str]:
    """What differs from the published version before any input is looked at (a phrase), or None."""
    moved = moved_options(parent.get("options") or {}, options)
    if moved:
        return "options changed: " + ", ".join(f"--{name}" for name in moved)
    if dict(parent.get("versions") or {}) != dict(versions):
        return "package versions changed"
    recorded = parent["lineage"]["inputs"]
    if recorded.get("code") != code:
        return "the pipeline's code changed"
    if recorded.get("listing") != listing:
        return "the listing file changed"
    return None


def inputs_moved(parent: dict, tally: Tally, discovered: int, filtered: Mapping[str, int]) -> Optional[str]:
    """What the launcher's look at the input found different from the published version, or None."""
    recorded = parent["lineage"]["inputs"]
    counts = parent.get("counts") or {}
    if discovered != counts.get("discovered"):
        return f"{discovered:,} inputs discovered, {counts.get('discovered', 0):,} before"
    if dict(filtered) != dict((counts.get("filtered_out") or {}).get("by_reason") or {}):
        return "other inputs are filtered out"
    if tally.pairs != recorded["pairs"]:
        return f"{tally.pairs:,} pairs to validate, {recorded['pairs']:,} before"
    if tally.digest() != recorded["digest"]:
        return "files were added, changed or removed"
    return None

