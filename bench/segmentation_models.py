"""DeepLabV3+ on MobileNetV2 against the U-Net, from scratch, with an equal budget, on real photographs.

The corpus is tools/photo_scenes.py's (``--pairs`` street-like scenes whose classes are the textures of
eight of scikit-image's photographs; there is no CamVid here), run through the pipeline into the work
folder once. Each model then trains with the same steps, batch, crop, learning rate and loss
(``python -m trainer``, --weights none), and ``trainer.evaluate`` measures its export on the whole test
split at full resolution. Printed per model: test mIoU, pixel accuracy, training steps/s (steps over the
epochs' time less the validation and batch-norm re-estimation the trainer logs) and the run's wall time.

    python bench/segmentation_models.py --pairs 400 --epochs 12 --steps 25
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive

MODELS = {
    "unet": ["--model", "unet"],
    "deeplabv3plus-mobilenetv2": ["--model", "deeplabv3plus", "--backbone", "MobileNetV2", "--weights", "none"],
}
EPOCH_LINE = re.compile(r"^(\d+)/\1 - (\d+(?:\.\d+)?)s - ")
TIMED_LINE = re.compile(r"(?:validation after epoch|batch norm: moving statistics).*\((\d+(?:\.\d+)?) s\)$")


def dataset(workdir: Path, pairs: int) -> Path:
    out = workdir / f"scenes_{pairs}_out"
    if not (out / "manifest.json").exists():
        corpus = workdir / f"scenes_{pairs}"
        if not (corpus / "listing.csv").exists():
            log(f"writing {pairs} scenes -> {corpus}")
            subprocess.run([sys.executable, "-m", "tools.photo_scenes", str(corpus), "--pairs", str(pairs)],
                           cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        log(f"running the pipeline -> {out}")
        subprocess.run([sys.executable, "-m", "beam_pipeline", "--input", str(corpus / "listing.csv"), "--output",
                        str(out), "--num_classes", "8", "--ignore_label", "255", "--overwrite"], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
    return out


def train_and_evaluate(name: str, data: Path, job: Path, args) -> dict:
    command = [sys.executable, "-m", "trainer", "--data", str(data), "--job_dir", str(job), "--strategy", "default",
               "--epochs", str(args.epochs), "--steps_per_epoch", str(args.steps), "--global_batch_size",
               str(args.batch), "--crop", f"{args.crop},{args.crop}", "--validation_steps", "1", *MODELS[name]]
    started = time.monotonic()
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.monotonic() - started
    (job.parent / f"{name}.log").write_text(completed.stdout + completed.stderr)
    lines = (completed.stdout + completed.stderr).splitlines()
    epochs = [float(m.group(2)) for m in map(EPOCH_LINE.match, lines) if m]
    extra = sum(float(m.group(1)) for m in map(TIMED_LINE.search, lines) if m)
    figures = job.parent / f"{name}-eval.json"
    subprocess.run([sys.executable, "-m", "trainer.evaluate", "--model", str(job / "export"), "--data", str(data),
                    "--split", "test", "--output", str(figures)], cwd=ROOT, check=True, capture_output=True)
    result = json.loads(figures.read_text())
    return {"model": name, "mean_iou": result["mean_iou"], "pixel_accuracy": result["pixel_accuracy"],
            "steps_per_second": args.epochs * args.steps / max(sum(epochs) - extra, 1e-9), "wall_seconds": wall,
            "test_images": result["images"]}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--pairs", type=positive, default=400)
    parser.add_argument("--epochs", type=positive, default=12)
    parser.add_argument("--steps", type=positive, default=25, help="steps per epoch")
    parser.add_argument("--batch", type=positive, default=8)
    parser.add_argument("--crop", type=positive, default=128)
    args = parser.parse_args(argv)
    data = dataset(args.workdir, args.pairs)
    runs = args.workdir / f"segmentation_models_{int(time.time())}"
    rows = []
    for name in MODELS:
        log(f"training {name}: {args.epochs} x {args.steps} steps of {args.batch} crops of {args.crop}")
        rows.append(train_and_evaluate(name, data, runs / name, args))
        log(json.dumps(rows[-1]))
    print(f"{'model':28} {'test mIoU':>9} {'pixel acc':>9} {'steps/s':>8} {'wall s':>7}")
    for row in rows:
        print(f"{row['model']:28} {row['mean_iou']:9.3f} {row['pixel_accuracy']:9.3f} "
              f"{row['steps_per_second']:8.2f} {row['wall_seconds']:7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
