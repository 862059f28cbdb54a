"""Statistics on a grown corpus (issue 21): tf.Transform fed every cached summary, or its analyzer cache.

Two ways to get the exact train statistics of D + Δ once D's are known:

    summaries       what the pipeline does (stages/stats.py, docs/cache.md): every pair's summary (from
                    the verdict cache or a fresh decode) batched into Arrow record batches and analysed
                    by ``tft_beam.AnalyzeDataset``;
    analyzer cache  ``tft_beam.AnalyzeDatasetWithCache`` with D and Δ as two dataset keys: D's
                    accumulators read from the analysis cache a run on D wrote
                    (``analyzer_cache.WriteAnalysisCacheToFS``, not timed) and none of D's rows read,
                    only Δ analysed, and Δ's accumulators written for the next run.

The summaries are real: the verdicts of a pipeline run on the photo corpus's copies, read from its
verdict cache (``--cache``; by default the run is made into the work folder first) and repeated to
``--pairs`` rows. Each case runs its own Beam pipeline on the DirectRunner in this process, the cases
interleaved over ``--repeats``; figures are wall times, median (min..max), and the ratio of the two in
each repeat. Both transform outputs are loaded with ``tft.TFTransformOutput`` and must give the same
totals (the graph's constants) to the last digit.

    python bench/stats_cache.py --pairs 20000,100000 --repeats 3
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread

sys.path.insert(0, str(ROOT))

NUM_CLASSES = 8
TASK = "segmentation"
SEED_PAIRS = 2000


def seed_summaries(args) -> list[dict]:
    """The raw summary rows of the verdicts in a verdict cache (a run on the photo copies when none is given)."""
    from beam_pipeline.core.records import unpack
    from beam_pipeline.core.stats import summary_values
    from beam_pipeline.core.rerun.verdicts import NUM_BUCKETS
    from beam_pipeline.io.cache import verdicts as verdict_store
    cache = args.cache
    if cache is None:
        from scale import first_rows, pair_copies
        out = args.workdir / "stats_cache" / "seed"
        if not (out / "manifest.json").exists():
            log(f"a pipeline run on {SEED_PAIRS:,} photo copies, for real summaries -> {out}")
            listing = first_rows(pair_copies(args.workdir, SEED_PAIRS), SEED_PAIRS)
            subprocess.run([sys.executable, "-m", "beam_pipeline", "--input", str(listing), "--output", str(out),
                            "--num_classes", str(NUM_CLASSES)], cwd=ROOT, check=True, capture_output=True)
        cache = next(path for path in (out / "cache").iterdir() if path.is_dir())
    rows = []
    for bucket in range(NUM_BUCKETS):
        for verdict in verdict_store.load(str(cache), bucket).values():
            if verdict.valid:
                rows.append(summary_values(unpack(verdict.valid), TASK))
    if not rows:
        raise SystemExit(f"{cache} holds no valid verdict")
    return rows


def _source():
    from tensorflow_transform.tf_metadata import schema_utils
    from tfx_bsl.public import tfxio
    from beam_pipeline.stages.preprocessing import raw_feature_spec
    schema = schema_utils.schema_from_feature_spec(raw_feature_spec(TASK, NUM_CLASSES))
    return tfxio.TFExampleBeamRecord(physical_format="inmem", telemetry_descriptors=["bench"], schema=schema)


def _batches(pipeline, name: str, rows: list[dict], source):
    import apache_beam as beam
    from beam_pipeline.stages.stats import MAX_BATCH, ToRecordBatchFn
    chunks = [rows[start:start + MAX_BATCH] for start in range(0, len(rows), MAX_BATCH)]
    return (pipeline | f"Create{name}" >> beam.Create(chunks, reshuffle=False)
            | f"ToRecordBatches{name}" >> beam.ParDo(ToRecordBatchFn(source.ArrowSchema())))


def summaries_case(rows: list[dict], output: Path, temp: Path) -> float:
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from beam_pipeline.stages.preprocessing import bound_preprocessing_fn
    source = _source()
    started = time.perf_counter()
    with tft_beam.Context(temp_dir=str(temp), force_tf_compat_v1=False), beam.Pipeline() as pipeline:
        transform_fn = ((_batches(pipeline, "All", rows, source), source.TensorAdapterConfig())
                        | tft_beam.AnalyzeDataset(bound_preprocessing_fn(TASK, NUM_CLASSES)))
        _ = transform_fn | tft_beam.WriteTransformFn(str(output))
    return time.perf_counter() - started


def analyzer_cache_case(base: list[dict], delta: list[dict], output: Path, temp: Path, cache_dir: Path) -> float:
    """D's accumulators written (not timed), then D + Δ with D's read from the cache (timed)."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.beam import analyzer_cache
    from beam_pipeline.stages.preprocessing import bound_preprocessing_fn
    source = _source()
    key_d, key_delta = analyzer_cache.DatasetKey("d"), analyzer_cache.DatasetKey("delta")
    preprocessing_fn = bound_preprocessing_fn(TASK, NUM_CLASSES)
    with tft_beam.Context(temp_dir=str(temp), force_tf_compat_v1=False), beam.Pipeline() as pipeline:
        _, cache = (({key_d: _batches(pipeline, "D", base, source)}, {}, source.TensorAdapterConfig())
                    | tft_beam.AnalyzeDatasetWithCache(preprocessing_fn))
        _ = cache | analyzer_cache.WriteAnalysisCacheToFS(pipeline, str(cache_dir), [key_d])
    started = time.perf_counter()
    with tft_beam.Context(temp_dir=str(temp), force_tf_compat_v1=False), beam.Pipeline() as pipeline:
        input_cache = pipeline | analyzer_cache.ReadAnalysisCacheFromFS(str(cache_dir), [key_d, key_delta])
        # D is covered by its cache: tf.Transform reads none of it (its PCollection may be None).
        data = {key_d: None, key_delta: _batches(pipeline, "Delta", delta, source)}
        transform_fn, cache = ((data, input_cache, source.TensorAdapterConfig())
                               | tft_beam.AnalyzeDatasetWithCache(preprocessing_fn))
        _ = transform_fn | tft_beam.WriteTransformFn(str(output))
        _ = cache | analyzer_cache.WriteAnalysisCacheToFS(pipeline, str(cache_dir), [key_d, key_delta])
    return time.perf_counter() - started


def totals(output: Path) -> dict:
    """The graph's constants: every output of transforming one empty row."""
    import tensorflow as tf
    import tensorflow_transform as tft
    from beam_pipeline.stages.preprocessing import raw_feature_spec
    from beam_pipeline.stages.stats import empty_values
    spec = raw_feature_spec(TASK, NUM_CLASSES)
    empty = {name: tf.constant([values if spec[name].shape else values[0]], dtype=spec[name].dtype)
             for name, values in empty_values(spec).items()}
    transformed = tft.TFTransformOutput(str(output)).transform_raw_features(empty, drop_unused_features=True)
    return {name: tensor.numpy().tolist() for name, tensor in transformed.items()}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--cache", type=Path, default=None,
                        help="a verdict cache's fingerprint folder to take the summaries from")
    parser.add_argument("--pairs", default="20000,100000", help="train summaries of D + Δ, comma-separated")
    parser.add_argument("--delta_every", type=positive, default=20, help="every n-th summary is Δ (default 5 %%)")
    parser.add_argument("--repeats", type=positive, default=3)
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    logging.getLogger().setLevel(logging.ERROR)
    seed = seed_summaries(args)
    lines = [f"tf.Transform analysis of D + Δ (Δ = every {args.delta_every}th pair), summaries of "
             f"{len(seed):,} real pairs repeated; median (min..max) of {args.repeats}:"]
    for pairs in sorted(int(text) for text in args.pairs.split(",")):
        rows = [seed[index % len(seed)] for index in range(pairs)]
        base = [row for index, row in enumerate(rows) if index % args.delta_every != args.delta_every - 1]
        delta = [row for index, row in enumerate(rows) if index % args.delta_every == args.delta_every - 1]
        fed, cached, same = [], [], []
        for repeat in range(args.repeats):
            work = Path(tempfile.mkdtemp(prefix="stats-cache-", dir=args.workdir))
            try:
                order = ("summaries", "analyzer_cache") if repeat % 2 == 0 else ("analyzer_cache", "summaries")
                for case in order:
                    log(f"{pairs:,} summaries, repeat {repeat + 1}: {case}")
                    if case == "summaries":
                        fed.append(summaries_case(rows, work / "fed", work / "tmp_fed"))
                    else:
                        cached.append(analyzer_cache_case(base, delta, work / "cached", work / "tmp_cached",
                                                          work / "analysis_cache"))
                same.append(totals(work / "fed") == totals(work / "cached"))
            finally:
                shutil.rmtree(work, ignore_errors=True)
        lines += [f"  {pairs:,} pairs: all summaries fed {spread(fed, '{:.1f}')} s; analyzer cache (Δ = {len(delta):,} "
                  f"analysed) {spread(cached, '{:.1f}')} s; cache / fed {spread([c / f for c, f in zip(cached, fed)])}; "
                  f"equal totals in {sum(same)} of {len(same)}"]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
