"""The floor under a run's fixed cost: what the libraries the pipeline must use cost before it does any work of its
own, side by side with README's first run (issue 44; docs/benchmarks.md, "Fast start").

What is measured (each a fresh ``python`` process, spawn to reaping; common.run_measured)
    ``python``      ``python -c pass``: the interpreter and the virtual environment's site;
    ``beam``        ``import apache_beam``: what any Beam pipeline pays before its first line;
    ``imports``     ``import apache_beam`` and ``import tensorflow_transform.beam``: the same with tf.Transform,
                    which imports TensorFlow (both with the garbage collector off, as the pipeline imports them);
    ``tft_job``     the smallest job that computes statistics with tf.Transform the way the pipeline does (TF2
                    tracing, ``AnalyzeDataset`` then ``WriteTransformFn`` and ``TransformDataset``), on one
                    in-memory row with one ``tft.sum``, on the DirectRunner in its process (its in-memory
                    engine, one worker, as README's runs), with the garbage collector off, as the pipeline
                    runs; it writes into a fresh temporary folder;
    ``readme``      README's first run: ``python -m beam_pipeline`` on the sample corpus's 252 segmentation rows
                    (``--task segmentation --num_classes 8 --ignore_label 255``) into a fresh output.

Figures: median (min..max) wall seconds over ``--repeats`` interleaved repetitions (the order reversed every
other one), and README's run less each floor within each repetition: the part of its time that is the
pipeline's own (its construction, its ~90 stages, validation, writing, publishing and the report) rather than
the libraries'. The CPU other processes used meanwhile is printed per run.

    python bench/stack_floor.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from common import log, readme_sample, run_measured  # noqa: E402
from harness import fmt_spread, interleaved, spread_figure, write_json  # noqa: E402
from readme_runs import RUNS as README_RUNS  # noqa: E402

TFT_JOB = """
import gc, os, sys, tempfile
gc.disable()
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

SPEC = {"x": tf.io.FixedLenFeature([], tf.int64)}

def preprocessing_fn(inputs):
    return {"total": tf.ones_like(inputs["x"]) * tft.sum(inputs["x"])}

out = sys.argv[1]
metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(SPEC))
options = PipelineOptions(["--direct_running_mode", "in_memory", "--direct_num_workers", "1"])
with beam.Pipeline(options=options) as pipeline, tft_beam.Context(temp_dir=tempfile.mkdtemp(dir=out),
                                                                  force_tf_compat_v1=False):
    rows = pipeline | beam.Create([{"x": 3}])
    transform_fn = (rows, metadata) | tft_beam.AnalyzeDataset(preprocessing_fn)
    _ = transform_fn | tft_beam.WriteTransformFn(os.path.join(out, "transform"))
    (transformed, _) = ((rows, metadata), transform_fn) | tft_beam.TransformDataset()
    _ = transformed | beam.Map(lambda row: row["total"])
os._exit(0)
"""

KINDS = ("python", "beam", "imports", "tft_job", "readme")
FLOORS = ("python", "beam", "imports", "tft_job")


def command(kind: str, sample: Path, output: Path) -> list:
    python = sys.executable
    if kind == "python":
        return [python, "-c", "pass"]
    if kind == "beam":
        return [python, "-c", "import gc; gc.disable(); import apache_beam"]
    if kind == "imports":
        return [python, "-c", "import gc, os; gc.disable(); os.environ.setdefault('TF_USE_LEGACY_KERAS', '1'); "
                              "import apache_beam; import tensorflow_transform.beam; os._exit(0)"]
    if kind == "tft_job":
        return [python, "-c", TFT_JOB, str(output)]
    return [python, "-m", "beam_pipeline", *README_RUNS["segmentation"](sample), "--output", str(output)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repetitions (default 5)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench" / "stack_floor",
                        help="the sample corpus, the outputs and the logs (default build/bench/stack_floor)")
    parser.add_argument("--json", type=Path, help="also write every run and figure here")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    sample = readme_sample(args.workdir / "sample")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    runs = {kind: [] for kind in KINDS}
    for repeat in range(args.repeats):
        for kind in interleaved(KINDS, repeat):
            output = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=args.workdir))
            if kind == "readme":
                shutil.rmtree(output)
            result = run_measured(command(kind, sample, output), ROOT, args.workdir / f"{kind}.log", env)
            shutil.rmtree(output, ignore_errors=True)
            runs[kind].append(result)
            log(f"repeat {repeat + 1} {kind}: {result['seconds']:.2f} s (other processes "
                f"{result['other_cores']:.2f} cores)")
    figures = {kind: spread_figure([run["seconds"] for run in runs[kind]]) for kind in KINDS}
    own = {floor: spread_figure([readme["seconds"] - base["seconds"]
                                 for readme, base in zip(runs["readme"], runs[floor])]) for floor in FLOORS}
    print(f"\nwall seconds, median (min..max) of {args.repeats}:")
    for kind in KINDS:
        print(f"  {kind:10s} {fmt_spread(figures[kind], '.2f', ' s')}")
    print("README's run less each floor, within each repetition:")
    for floor in FLOORS:
        print(f"  - {floor:10s} {fmt_spread(own[floor], '.2f', ' s')}")
    if args.json:
        write_json(args.json, {"runs": runs, "figures": figures, "readme_less": own})
    return 0


if __name__ == "__main__":
    sys.exit(main())
