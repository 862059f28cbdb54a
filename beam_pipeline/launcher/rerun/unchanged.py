"""--skip_unchanged: a re-run that finds nothing changed since the published version publishes nothing, and says so.

The rules are core/rerun/unchanged.py's. Here the launcher, holding the output's lock and before it imports
TensorFlow or starts a worker, looks at what the version was made of:

1. the dataset options, the package versions, the code and the listing file's version, against the manifest's;
2. every file the version publishes (a version each, WORKERS at a time; the SHA-256 of those whose version moved:
   launcher/rerun/parent.py), so that no damaged version is taken as current;
3. the input itself, streamed as ReadCorpus and SelectSubset find it (stages/pairs.py: the same functions, one
   row or file at a time), each selected pair's files' versions (stat, or a metadata request on gs:// and s3://,
   several batches at once there), summed into the digest ValidatePairs recorded.

The first difference stops the look, and the pipeline runs as it would have. Memory stays that of a batch of pairs.
"""

import collections
import dataclasses
import functools
import hashlib
import json
import logging
import pathlib
import time
from typing import Iterator, List, Optional, Tuple

from beam_pipeline.core import paths
from beam_pipeline.core.records import FILTERED, Outcome, PairRef
from beam_pipeline.core.rerun import parent as parent_rules
from beam_pipeline.core.rerun import unchanged as rules
from beam_pipeline.io.ahead import mapped_ahead
from beam_pipeline.launcher import launch
from beam_pipeline.launcher.commit import OutputRun, read_manifest
from beam_pipeline.launcher.rerun.parent import look_at
from beam_pipeline.stages import pairs
from beam_pipeline.stages.specs import CLASS_FOLDERS, LISTING
from beam_pipeline.stages.validate import pre_key, versions_of

WORKERS = 16          # batches of pairs looked at at once on gs:// and s3:// (a metadata request a file)
BATCH = 256           # pairs a batch

_LOG = logging.getLogger("beam_pipeline.unchanged")
_STREAMED = (LISTING, CLASS_FOLDERS, pairs.SPLIT_FILE)


@dataclasses.dataclass(frozen=True)
class Unchanged:
    """What the look found when nothing changed: the version, its pairs, the files looked at, the seconds."""
    run_id: str
    pairs: int
    files: int
    hashed: int
    seconds: float

    def entry(self) -> dict:
        """run()'s ``unchanged``, beside the published manifest it returns."""
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """The SHA-256 of this package's files (their paths and bytes: the source and the shipped mask maps, not the
    compiled caches), as the version records it."""
    root = pathlib.Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\x00" + path.read_bytes() + b"\x00")
    return digest.hexdigest()


def listing_version(config) -> Optional[str]:
    """The listing file's version (io/streams.py file_version), or None for folders."""
    return pre_key(config.input) if config.input_format == LISTING else None


def context(config) -> dict:
    """What the launcher adds to a run's ``lineage.inputs``, taken before the pipeline reads anything: the listing's
    version (a listing written again during the run then counts as changed) and the code's digest."""
    return {"listing": listing_version(config), "code": code_digest()}


def recorded(inputs: Optional[dict], taken: dict) -> Optional[dict]:
    """manifest.json's ``lineage.inputs`` as the pipeline left it (its pairs and digest), with ``taken``
    (:func:`context`). None without a cache (no versions were taken)."""
    return dict(inputs, **taken) if inputs else None


def _streamable(config) -> bool:
    spec = config.discover_spec()
    return spec.annotations is None and all(source.kind in _STREAMED for source in pairs.sources(spec))


def _remote(config) -> bool:
    return bool(paths.split_scheme(config.input_root)[0]) or bool(paths.split_scheme(config.input)[0])


def _published_files(output: str, previous: dict) -> Tuple[Optional[str], int, int]:
    """(the first problem of a file the version publishes, or None; files looked at; of which hashed)."""
    table = previous.get("files") or {}
    to_check = [parent_rules.expected_file(path, table) for path in sorted(table)]
    looked = look_at(output, to_check)
    hashed = sum(1 for _, size in looked if size)
    for expected, (verdict, _) in zip(to_check, looked):
        if verdict != parent_rules.OK:
            return f"the published {expected.path} {verdict}", len(to_check), hashed
    return None, len(to_check), hashed


def _tokens(batch: List[PairRef]) -> List[Tuple[int, ...]]:
    return [rules.pair_token(ref.key, ref.label, versions_of(ref)) for ref in batch]


def _selected(config, split, discovered: collections.Counter, filtered: collections.Counter) -> Iterator[PairRef]:
    """The pairs this run would validate, streamed, counting the inputs discovered and filtered out on the way."""
    spec, select = config.discover_spec(), config.select_spec(split)
    for source in pairs.sources(spec):
        for item in pairs.discover_source(spec, source):
            discovered["all"] += 1
            if isinstance(item, Outcome):
                continue
            outcome = pairs.excluded(item, select)
            if outcome is not None:
                if outcome.status == FILTERED:
                    filtered[outcome.reason] += 1
                continue
            item = pairs.with_split(item, select)
            if isinstance(item, PairRef):
                yield item


def _batches(refs: Iterator[PairRef]) -> Iterator[List[PairRef]]:
    batch = []
    for ref in refs:
        batch.append(ref)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _look_at_input(config, split, previous: dict) -> Optional[str]:
    """What differs in the input (a phrase), or None: the pairs' tokens summed as ValidatePairs summed them."""
    discovered, filtered = collections.Counter(), collections.Counter()
    tally, most = rules.Tally(), previous["lineage"]["inputs"]["pairs"]
    batches = _batches(_selected(config, split, discovered, filtered))
    if _remote(config):             # a metadata request a file: WORKERS batches at once
        token_lists = (tokens for _, tokens in mapped_ahead(_tokens, batches, WORKERS, 2 * WORKERS))
    else:
        token_lists = map(_tokens, batches)
    for tokens in token_lists:
        for token in tokens:
            tally.add(token)
        if tally.pairs > most:
            return f"more than the {most:,} pairs validated before"
    return rules.inputs_moved(previous, tally, discovered["all"], filtered)


def skipped(launched) -> Optional[dict]:
    """The published manifest with ``unchanged`` (an :class:`Unchanged`'s entry) and ``elapsed_seconds`` when nothing
    changed since it, looked at under the output's lock; else None, and the pipeline runs. ``launched``: the checked
    command line (launcher/launch.py Launch)."""
    config, started = launched.config, time.monotonic()
    if config.skip_unchanged == rules.SKIP_NEVER or read_manifest(config.output) is None:
        return None
    with OutputRun(launch.store_of(config, launched.options), config.output, config.overwrite,
                   config.keep_versions) as output_run:
        found = unchanged_since(config, launched.split, output_run.previous,
                                json.loads(json.dumps(config.as_dict())), launch.package_versions(),
                                config.skip_unchanged)
    if found is None:
        return None
    return dict(output_run.previous, unchanged=found.entry(), elapsed_seconds=time.monotonic() - started)


def unchanged_since(config, split, previous: Optional[dict], options: dict, versions: dict,
                    mode: str) -> Optional[Unchanged]:
    """Unchanged when nothing changed since ``previous`` (the published manifest), else None (the reason logged)."""
    started = time.monotonic()
    why = rules.why_not_checked(mode, previous, config.use_cache, config.revalidate, config.cache_audit,
                                config.max_examples, _streamable(config), _remote(config))
    if why is None:
        why = rules.what_moved(previous, options, versions, code_digest(), listing_version(config))
    files = hashed = 0
    if why is None:
        why, files, hashed = _published_files(config.output, previous)
    if why is None:
        why = _look_at_input(config, split, previous)
    seconds = time.monotonic() - started
    if why is not None:
        if previous is not None:
            _LOG.info("Running: %s since version %s (looked for %.1f s)", why, previous.get("run_id"), seconds)
        return None
    return Unchanged(previous["run_id"], previous["lineage"]["inputs"]["pairs"], files, hashed, seconds)
