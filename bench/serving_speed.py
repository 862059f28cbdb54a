"""CPU inference speed of the exported serving model on 480x360 images (issue 11).

What is measured
    Images per second through the SavedModel's ``serving_default`` signature,
    the deployed artifact: JPEG/PNG bytes in, class maps out, so decoding, the
    tf.Transform normalisation, the mirror padding (360 -> 368 rows for a
    depth-4 U-Net), the network and the crop back are all inside. The images
    are the 480x360 (width x height) images of the data's test and val splits,
    as the pipeline stored them. Requests of ``--batch_sizes`` images (default
    1 and 8) are timed after one warm-up request each (tracing); the batch
    sizes take turns, in an order reversed on every other repeat, and the
    medians over ``--repeats`` are printed with their spread (min-max), the CPU
    time per image, and the ratio of the per-image rates (batch 8 over batch
    1) measured side by side.

Model
    ``--model EXPORT_DIR``, or by default the default U-Net of ``python -m
    trainer`` (depth 4, width 32, 8 classes) exported untrained with the
    data's tf.Transform graph: the speed does not depend on the weights.

Run
    .venv/bin/python bench/serving_speed.py --data build/out/segmentation
"""

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



def _images_of_size(data: str, height: int, width: int, count: int):
    """Encoded images of height x width from the test and val shards (as stored by the pipeline)."""
    import tensorflow as tf
    from PIL import Image
    manifest = json.load(open(os.path.join(data, "manifest.json")))
    found = []
    for split in ("test", "val", "train"):
        for shard in manifest["splits"].get(split, {}).get("shards", []):
            for raw in tf.data.TFRecordDataset(os.path.join(data, manifest.get("data_dir", ""), shard["path"])):
                encoded = tf.train.Example.FromString(raw.numpy()).features.feature["image/encoded"].bytes_list.value[0]
                if Image.open(io.BytesIO(encoded)).size == (width, height) and encoded not in found:
                    found.append(encoded)
                if len(found) == count:
                    return found
    if not found:
        raise SystemExit(f"no {width}x{height} image in {data}")
    return (found * count)[:count]


def _default_export(data: str, folder: str) -> str:
    from trainer.data.artifacts import load_artifacts
    from trainer.models.networks import ModelConfig, build_model
    from trainer.export.signature import ServingConfig, export_serving_model
    artifacts = load_artifacts(data)
    config = ModelConfig()
    model = build_model("segmentation", artifacts.num_classes, config)
    return export_serving_model(model, artifacts.transform_dir, os.path.join(folder, "export"),
                                ServingConfig("segmentation", tuple(artifacts.class_names), multiple=2 ** config.depth))


def _time(serve, images, batch_size: int):
    import tensorflow as tf
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(images), batch_size):
        serve(image_bytes=tf.constant(images[start:start + batch_size]))["class_map"].numpy()
    return len(images) / (time.perf_counter() - wall), (time.process_time() - cpu) / len(images)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="A segmentation output of the pipeline (its transform/ and "
                                                      "its 480x360 images are used).")
    parser.add_argument("--model", default=None, help="An exported model; default: the default U-Net, untrained.")
    parser.add_argument("--images", type=int, default=16, help="Images per timed run (default 16).")
    parser.add_argument("--batch_sizes", default="1,8", help="Images per request, comma-separated (default 1,8).")
    parser.add_argument("--repeats", type=int, default=5, help="Timed runs per batch size (default 5).")
    args = parser.parse_args(argv)
    import tensorflow as tf
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    images = _images_of_size(args.data, 360, 480, args.images)
    with tempfile.TemporaryDirectory() as folder:
        export = args.model or _default_export(args.data, folder)
        serve = tf.saved_model.load(export).signatures["serving_default"]
        for batch_size in batch_sizes:          # warm-up: one request of each batch size
            serve(image_bytes=tf.constant(images[:batch_size]))
        rates = {b: [] for b in batch_sizes}
        cpu = {b: [] for b in batch_sizes}
        load = []
        for repeat in range(args.repeats):
            order = batch_sizes if repeat % 2 == 0 else batch_sizes[::-1]
            for batch_size in order:
                rate, seconds = _time(serve, images, batch_size)
                rates[batch_size].append(rate)
                cpu[batch_size].append(seconds)
            load.append(os.getloadavg()[0])
    print(f"serving_default of {'the default U-Net (untrained)' if not args.model else args.model}, "
          f"{len(images)} images of 480x360 per run, {args.repeats} runs per batch size, "
          f"{os.cpu_count()} cores, load average {min(load):.1f}-{max(load):.1f}")
    for batch_size in batch_sizes:
        values = rates[batch_size]
        print(f"  batch {batch_size:>3}: {statistics.median(values):6.3f} images/s "
              f"(min {min(values):.3f}, max {max(values):.3f}); CPU {statistics.median(cpu[batch_size]):.2f} s/image")
    if len(batch_sizes) > 1:
        first, last = batch_sizes[0], batch_sizes[-1]
        ratios = [a / b for a, b in zip(rates[last], rates[first])]
        print(f"  batch {last} / batch {first} images/s, per run: median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
