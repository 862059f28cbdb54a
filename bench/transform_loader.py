"""The trainer's input throughput with its own transform-graph loader against tf.Transform's (issue 28).

Two measurements, each new against old in the same run:

- ``trainer``: the batches ``trainer.data.input.make_dataset`` gives for training (the pipeline's train shards,
  shuffled records, decoding, class-uniform crops, normalisation, augmentation, batch), its Decoder given
  ``trainer.data.transform_graph.TransformGraph`` (new) or ``tft.TFTransformOutput``'s Keras layer (old, what
  trainer/data/decode.py used before). It decodes directly after checking one record against the graph, so the
  graph's cost is in its start-up and that record.
- ``graph``: every record decoded through the graph itself (what the Decoder falls back to, and what the
  served model runs): serialized Example -> the graph's normalised image and mask, no batching.

Each run is a fresh child process; after ``--warmup`` elements, ``--elements`` are timed (batches for
``trainer``, examples for ``graph``). Within a repeat the order of new and old alternates; the report gives
the median ratio new/old of elements per second, its spread over ``--repeats``, and each side's median,
and the ratio of CPU time per element (old/new; less sensitive to the neighbours' load than the rate).
The data is bench/segmentation_models.py's scenes (real photographs), built on first use.

    python bench/transform_loader.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread

CHILD = """
import json, resource, sys, time
import tensorflow as tf
from trainer.data.artifacts import load_artifacts
from trainer.data.input import InputConfig, make_dataset
from trainer.data.decode import Decoder
from trainer.data.transform_graph import TransformGraph

data, loader, mode, warmup, elements = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
artifacts = load_artifacts(data)


class TftGraph:
    def __init__(self, transform_dir):
        import tensorflow_transform as tft
        output = tft.TFTransformOutput(transform_dir)
        self.raw_feature_spec = output.raw_feature_spec()
        self._layer = output.transform_features_layer()

    def __call__(self, features):
        return self._layer(features)


started = time.monotonic()
graph = TransformGraph(artifacts.transform_dir) if loader == "new" else TftGraph(artifacts.transform_dir)
if mode == "trainer":
    dataset = make_dataset(artifacts, "train", InputConfig(batch_size=8, crop=(128, 128), drop_remainder=True),
                           training=True, graph=graph)
else:
    decoder = Decoder(artifacts, graph=graph)
    dataset = (tf.data.TFRecordDataset(artifacts.shard_paths("train")).repeat()
               .map(decoder, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False).prefetch(tf.data.AUTOTUNE))
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


iterator = iter(dataset)
for _ in range(warmup):
    next(iterator)
ready, ready_cpu = time.monotonic(), cpu()
for _ in range(elements):
    next(iterator)
done, done_cpu = time.monotonic(), cpu()
print("RESULT " + json.dumps({"per_second": elements / (done - ready), "start_seconds": ready - started,
                              "cpu_ms": 1000 * (done_cpu - ready_cpu) / elements}))
"""


def run_child(data: Path, loader: str, mode: str, warmup: int, elements: int) -> dict:
    completed = subprocess.run([sys.executable, "-c", CHILD, str(data), loader, mode, str(warmup), str(elements)],
                               cwd=ROOT, capture_output=True, text=True, check=True)
    line = [text for text in completed.stdout.splitlines() if text.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--pairs", type=positive, default=400)
    parser.add_argument("--repeats", type=positive, default=5)
    parser.add_argument("--warmup", type=positive, default=20)
    parser.add_argument("--elements", type=positive, default=60)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from segmentation_models import dataset
    data = dataset(args.workdir, args.pairs)
    results = {(mode, loader): [] for mode in ("trainer", "graph") for loader in ("new", "old")}
    for repeat in range(args.repeats):
        for mode in ("trainer", "graph"):
            order = ("new", "old") if repeat % 2 == 0 else ("old", "new")
            for loader in order:
                elements = args.elements if mode == "trainer" else 4 * args.elements
                results[mode, loader].append(run_child(data, loader, mode, args.warmup, elements))
            log(f"repeat {repeat + 1}: {mode} new {results[mode, 'new'][-1]['per_second']:.2f}/s, "
                f"old {results[mode, 'old'][-1]['per_second']:.2f}/s")
    for mode, unit in (("trainer", "batches of 8"), ("graph", "examples")):
        new = [r["per_second"] for r in results[mode, "new"]]
        old = [r["per_second"] for r in results[mode, "old"]]
        ratios = [a / b for a, b in zip(new, old)]
        cpu = [b["cpu_ms"] / a["cpu_ms"] for a, b in zip(results[mode, "new"], results[mode, "old"])]
        print(f"{mode}: CPU per element old/new {spread(cpu)} (above 1: the new one costs less)")
        print(f"{mode}: new/old {spread(ratios)} over {args.repeats} repeats; new {statistics.median(new):.2f}, "
              f"old {statistics.median(old):.2f} {unit}/s; start-up (to the first element) new "
              f"{spread([r['start_seconds'] for r in results[mode, 'new']], '{:.1f}')} s, old "
              f"{spread([r['start_seconds'] for r in results[mode, 'old']], '{:.1f}')} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
