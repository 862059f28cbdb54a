"""Balancing at training time (issue 27): what repeat-factor sampling costs the trainer, and how its copies mix.

A dataset of ``--pairs`` distinct copies of the photo corpus's pairs (tools/corpus_copies.py) is built once with the
pipeline's defaults (``--balance training``: each image once) into the work folder and kept. Then, in this process:

1. Training throughput. The trainer's own input (trainer.train.split_dataset) and model (build_compiled_model,
   the default U-Net at ``--crop``) train ``--epochs`` epochs of ``--steps`` steps with ``--sampling shards``
   (no balancing) and with ``--sampling repeat_factor`` (the default for such a dataset), the two taking turns
   over ``--repeats``. The first epoch of each (tracing, warm-up) is not counted; steps/s over the others. The
   figure: the median (min..max) of balanced / unbalanced within each repeat (target >= 0.95).
2. Copies in one batch. The serialized records the trainer reads (trainer.data.record_stream, repeat counts and
   shuffle as trained) are batched for ``--mix_epochs`` epochs; each batch's pairs of records from the same image
   are counted, against the pairs a random permutation of each epoch's records would put in one batch
   (sum over images of C(n, 2) * (B - 1) / (M - 1), n an image's copies in the epoch, M the epoch's records,
   B the batch). A ratio near 1 means copies share a batch about as rarely as chance would have it.

    python bench/training_balance.py --pairs 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread
from scale import NUM_CLASSES, first_rows, pair_copies

sys.path.insert(0, str(ROOT))


def dataset(args, copies: Path) -> Path:
    out = args.workdir / "training_balance" / f"out_{args.pairs}"
    if not (out / "manifest.json").exists():
        log(f"building the {args.pairs:,}-pair dataset -> {out}")
        out.parent.mkdir(parents=True, exist_ok=True)
        with (out.parent / f"pipeline_{args.pairs}.log").open("w") as handle:
            subprocess.run([sys.executable, "-m", "beam_pipeline", "--input", str(first_rows(copies, args.pairs)),
                            "--output", str(out), "--num_classes", str(NUM_CLASSES), "--overwrite", "--no_cache"],
                           cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, check=True)
    return out


def trainer_config(data: Path, args, sampling: str):
    from trainer.training.config import parse_config
    return parse_config(["--data", str(data), "--job_dir", str(args.workdir / "training_balance" / "job"),
                         "--sampling", sampling, "--global_batch_size", str(args.batch),
                         "--crop", f"{args.crop},{args.crop}", "--no_verify_shards",
                         "--balance_threshold", str(args.threshold)])


def steps_per_second(artifacts, config, args) -> float:
    import keras
    import tensorflow as tf
    from trainer.training.train import build_compiled_model, split_dataset

    keras.backend.clear_session()
    keras.utils.set_random_seed(config.seed)
    model = build_compiled_model(artifacts, config, artifacts.task)
    data, _ = split_dataset(artifacts, config, "train", True, tf.distribute.InputContext())
    ends: list[float] = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            ends.append(time.perf_counter())

    model.fit(data, epochs=args.epochs, steps_per_epoch=args.steps, callbacks=[Clock()], verbose=0)
    return (args.epochs - 1) * args.steps / (ends[-1] - ends[0])


def copies_in_batches(artifacts, config, args) -> dict:
    """How often two records of one image share a batch, against a perfect shuffle and against neighbours."""
    import tensorflow as tf
    from trainer.data.balance import RepeatCounts, class_repeat_factors, threshold_for
    from trainer.data.input import record_stream, shard_for_pipeline
    from trainer.data.decode import SOURCE_ID
    from trainer.training.train import input_config_for

    def source_of(serialized):
        return tf.io.parse_single_example(serialized, {SOURCE_ID: tf.io.FixedLenFeature([], tf.string)})[SOURCE_ID]

    factors = class_repeat_factors(artifacts.stats, threshold_for(artifacts.manifest, config.balance_threshold))
    counts = RepeatCounts(factors, artifacts.task, artifacts.num_classes, config.seed)
    shard = shard_for_pipeline(artifacts.shard_paths("train"), deleted=artifacts.deleted("train"))
    input_config = input_config_for(config, args.batch, True)
    place = {}                    # source id -> (file, index in the file's live records)
    for number, path in enumerate(shard.files):
        one = shard_for_pipeline([path], deleted={path: shard.deleted[number]} if shard.deleted else None)
        for index, source in enumerate(record_stream(one, input_config, training=False).map(source_of)):
            place[source.numpy()] = (number, index)
    draws = []                    # per epoch, each image's copies as the trainer draws them
    for epoch in range(args.mix_epochs):
        once = record_stream(shard, input_config, training=False).map(lambda s, e=epoch: (source_of(s), counts(s, e)))
        draws.append({source.numpy(): int(n.numpy()) for source, n in once})
    records = sum(sum(n.values()) for n in draws)
    copy_pairs = sum(sum(k * (k - 1) / 2 for k in n.values()) for n in draws)
    chance = sum(sum(k * (k - 1) / 2 for k in n.values()) * (args.batch - 1) / (sum(n.values()) - 1) for n in draws)
    batches = records // args.batch
    observed = 0
    for batch in record_stream(shard, input_config, True, counts).map(source_of).batch(args.batch).take(batches):
        observed += sum(k * (k - 1) // 2 for k in collections.Counter(batch.numpy().tolist()).values())
    # The same for two neighbouring records of a file (read one after the other) in the unbalanced stream.
    neighbours_together = 0
    plain_batches = len(place) * args.mix_epochs // args.batch
    for batch in record_stream(shard, input_config, True).map(source_of).batch(args.batch).take(plain_batches):
        places = {place[source] for source in batch.numpy().tolist()}
        neighbours_together += sum((f, i + 1) in places for f, i in places)
    neighbour_pairs = (len(place) - len(shard.files)) * args.mix_epochs
    return {"epochs": args.mix_epochs, "records": records, "images": len(place), "batches": batches,
            "copy_pairs": copy_pairs, "observed_pairs": observed, "chance_pairs": chance,
            "neighbour_pairs": neighbour_pairs, "neighbours_together": neighbours_together}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--pairs", type=positive, default=2000, help="pairs in the dataset (default 2000)")
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--epochs", type=positive, default=4, help="epochs per timed training, the first not counted")
    parser.add_argument("--steps", type=positive, default=30, help="steps per epoch (default 30)")
    parser.add_argument("--batch", type=positive, default=8, help="global batch size (default 8)")
    parser.add_argument("--crop", type=positive, default=128, help="patch side (default 128)")
    parser.add_argument("--threshold", type=float, default=1.0,
                        help="the trainer's --balance_threshold (default 1.0: the photo corpus's classes are common, "
                             "and at the pipeline's 0.5 few images would be repeated)")
    parser.add_argument("--mix_epochs", type=positive, default=3, help="epochs of records batched for the copies")
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: the first is not counted")
    data = dataset(args, pair_copies(args.workdir, args.pairs))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from trainer.data.artifacts import load_artifacts
    artifacts = load_artifacts(str(data))
    rates: dict[str, list[float]] = {"shards": [], "repeat_factor": []}
    for repeat in range(args.repeats):
        order = ("shards", "repeat_factor") if repeat % 2 == 0 else ("repeat_factor", "shards")
        for sampling in order:
            log(f"repeat {repeat + 1}: training with --sampling {sampling}")
            rates[sampling].append(steps_per_second(artifacts, trainer_config(data, args, sampling), args))
    log("batching the balanced record stream")
    balanced = trainer_config(data, args, "repeat_factor")
    mix = copies_in_batches(artifacts, balanced, args)
    ratios = [b / a for a, b in zip(rates["shards"], rates["repeat_factor"])]
    print(f"{args.pairs:,} photo-copy pairs, --balance_threshold {args.threshold}, U-Net at {args.crop}x{args.crop}, batch {args.batch}, "
          f"{args.epochs - 1} x {args.steps} timed steps, {args.repeats} repeat(s), median (min..max):")
    print(f"  steps/s, --sampling shards         {spread(rates['shards'], '{:.2f}')}")
    print(f"  steps/s, --sampling repeat_factor  {spread(rates['repeat_factor'], '{:.2f}')}")
    print(f"  balanced / unbalanced              {spread(ratios)} (target >= 0.95)")
    if mix["records"] / mix["epochs"] < 4 * balanced.shuffle_buffer:
        print(f"note: an epoch of {mix['records'] / mix['epochs']:.0f} records is not much larger than the shuffle "
              f"buffer: one image's records from consecutive epochs meet in it, and count here too")
    together = mix["observed_pairs"] / max(mix["copy_pairs"], 1)
    print(f"  records per epoch: {mix['records'] / mix['epochs']:.0f} from {mix['images']:,} images")
    print(f"copies in one batch, {mix['epochs']} epochs ({mix['records']:,} records of {mix['images']:,} images, "
          f"{mix['batches']:,} batches of {args.batch}):")
    print(f"  pairs of one image's copies in an epoch    {mix['copy_pairs']:,.0f}")
    print(f"  of them in one batch                        {mix['observed_pairs']} ({together:.2%})")
    print(f"  a perfect shuffle of each epoch would put   {mix['chance_pairs']:.1f} "
          f"({mix['chance_pairs'] / max(mix['copy_pairs'], 1):.2%}), ratio {mix['observed_pairs'] / max(mix['chance_pairs'], 1e-9):.1f}x")
    print(f"  two neighbouring records of a file, unbalanced stream: {mix['neighbours_together']} of "
          f"{mix['neighbour_pairs']:,} in one batch ({mix['neighbours_together'] / max(mix['neighbour_pairs'], 1):.2%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
