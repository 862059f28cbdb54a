"""ValidatePairs with several threads (the in-process engine's, stages/validate.py): the pairs read, decoded and checked
a few at a time, across verdict buckets, and what they leave written in order, so that the outputs, the spilled
records and the verdicts are those one thread leaves; on a first run and on a re-run that reuses, re-hashes and
re-checks verdicts."""

import dataclasses
import io
import os
import shutil

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from PIL import Image

from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.records import PairRef, unpack
from beam_pipeline.core.rerun import unchanged
from beam_pipeline.io.cache import verdicts as verdict_store
from beam_pipeline.stages.specs import CacheSpec, CheckSpec
from beam_pipeline.stages.validate import ValidatePairs

CHECK = CheckSpec("segmentation", Limits(num_classes=3), max_file_bytes=10**6)
FIRST_RUNS = ("20261206T100000Z-0000aaaa", "20261206T100000Z-0000aaab")
RERUNS = ("20261206T110000Z-0000bbbb", "20261206T110000Z-0000bbbc")
_COLLECTED = {}


def _collect(element, name):
    _COLLECTED.setdefault(name, []).append(element)


def png(array) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def corpus(folder, count=40):
    """``count`` pairs of real PNG files (noisy images of a few sizes, masks of up to three classes), every fifth one
    broken in one of four ways in turn: no mask file, a mask value above the classes, a mask of another size, an
    image file that is no image."""
    folder.mkdir()
    refs = []
    for i in range(count):
        rng = np.random.default_rng(i)
        height, width = 16 + i % 5, 20 + i % 7
        image = png(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
        mask = rng.integers(0, 3, (height, width), dtype=np.uint8)
        broken = (i // 5) % 4 if i % 5 == 4 else None
        if broken == 1:
            mask[0, 0] = 7
        elif broken == 2:
            mask = mask[:-1]
        (folder / f"p{i}.png").write_bytes(b"not an image at all" if broken == 3 else image)
        if broken != 0:
            (folder / f"p{i}_mask.png").write_bytes(png(mask))
        refs.append(PairRef(key=f"pair-{i:03d}", source_id=f"p{i}.png", image=str(folder / f"p{i}.png"),
                            mask=str(folder / f"p{i}_mask.png"), split="train"))
    return refs


def validate(refs, cache, threads):
    with TestPipeline() as p:
        valid, rejected, settled = p | beam.Create(refs) | ValidatePairs(CHECK, cache, threads=threads)
        _ = valid | "Valid" >> beam.Map(_collect, "valid")
        _ = rejected | "Rejected" >> beam.Map(_collect, "rejected")
        _ = settled | "Settled" >> beam.Map(_collect, "settled")
    return {name: _COLLECTED.pop(name, []) for name in ("valid", "rejected", "settled")}


def spilled(pair):
    """A pair without its spill's place (a file named by a token of the process), with the bytes it points to."""
    if not pair.spill:
        return pair, b""
    with open(pair.spill[0], "rb") as handle:
        handle.seek(pair.spill[1])
        return dataclasses.replace(pair, spill=()), handle.read(pair.spill[2])


def settled_view(outputs, cache_folder):
    """What a run settled, every name a process or a writer draws at random left out: each valid pair and its
    spilled record, each rejection, the counts; each bucket's verdicts, their pairs' spilled records read back; the
    order of the records in the spill files."""
    verdicts = {}
    for bucket in sorted(os.listdir(cache_folder)):
        if bucket.isdigit():
            for key, verdict in sorted(verdict_store.load(str(cache_folder), int(bucket)).items()):
                pair = unpack(verdict.valid) if verdict.valid else None
                verdicts[key] = (dataclasses.replace(verdict, valid=b""), pair and spilled(pair))
    in_spill = sorted((pair.spill[0].rsplit("-", 2)[-2:], pair.spill[1], pair.ref.key)      # split, file, offset
                      for pair in outputs["valid"] if pair.spill)
    return ({pair.ref.key: spilled(pair) for pair in outputs["valid"]},
            sorted(map(repr, outputs["rejected"])), sorted(outputs["settled"]), verdicts,
            [key for _, _, key in in_spill])


@pytest.mark.parametrize("threads", [2, 3])
def test_several_threads_settle_every_pair_as_one_does(tmp_path, threads):
    """The same valid pairs, spilled records, rejections, counts and verdicts with ``threads`` threads as with one,
    on a first run (every pair validated) and on a re-run (the verdicts reused, one file re-hashed, one pair checked
    again). Each run has its own run id: a process keeps one spill file per run."""
    refs = corpus(tmp_path / "in")
    cache_folder, first_cache = tmp_path / "cache" / "fp", tmp_path / "first_cache"
    first = {}
    for count, run in ((1, FIRST_RUNS[0]), (threads, FIRST_RUNS[1])):       # every pair validated afresh
        shutil.rmtree(cache_folder, ignore_errors=True)
        outputs = validate(refs, CacheSpec(str(cache_folder), run, spill="always"), count)
        first[count] = settled_view(outputs, cache_folder)
        if count == 1:
            shutil.copytree(cache_folder, first_cache)
    # a re-run: one image written again alike (re-hashed), one changed (checked again), the others reused
    (tmp_path / "in" / "p0.png").write_bytes((tmp_path / "in" / "p0.png").read_bytes())
    (tmp_path / "in" / "p1.png").write_bytes(png(np.full((17, 21, 3), 9, np.uint8)))
    rerun = {}
    for count, run in ((1, RERUNS[0]), (threads, RERUNS[1])):
        shutil.rmtree(cache_folder)
        shutil.copytree(first_cache, cache_folder)
        outputs = validate(refs, CacheSpec(str(cache_folder), run, spill="always", committed_run=FIRST_RUNS[0]),
                           count)
        rerun[count] = settled_view(outputs, cache_folder)
    valid, rejected, settled, verdicts, in_spill = first[1]
    assert len(valid) == 32 and len(rejected) == 8 and len(verdicts) == 38     # a missing file has no verdict
    assert all(record for _, record in valid.values()) and len(in_spill) == 32    # every valid pair spilled
    assert {line.split("reason=")[1].split(",")[0] for line in rejected} == {
        "'missing_file'", "'mask_value_out_of_range'", "'size_mismatch'", "'undecodable'"}
    assert {how for how, _ in rerun[1][2]} == {"from_cache", "rehashed", "validated", *unchanged.DIGEST_KEYS}
    # the sums of the pairs' tokens (the version's inputs digest): the same with threads (below), moved by the edits
    def total(settled, how):
        return sum(n for each, n in settled if each == how)
    assert [total(first[1][2], key) for key in unchanged.DIGEST_KEYS] != [
        total(rerun[1][2], key) for key in unchanged.DIGEST_KEYS]
    assert first[threads] == first[1]
    assert rerun[threads] == rerun[1]
