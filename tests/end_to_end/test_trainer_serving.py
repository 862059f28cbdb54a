"""The exported segmentation model: batches of images of any size, the same values as training, and errors.

The model is a U-Net of depth 4 (sides padded to multiples of 16) trained a few
steps on the sample corpus (``trainer_jobs.segmentation_job``). The expected
values come from numpy, Pillow and the pipeline's stats.json, never from the
trainer's serving code.
"""

import base64
import io
import json
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from conftest import NUM_CLASSES, ROOT, dataset_dir, free_port, stop_process_group, wait_for_port
from trainer_jobs import SEGMENTATION, segmentation_job

MULTIPLE = 2 ** SEGMENTATION["depth"]
SIZES = [(360, 480), (375, 500), (17, 23)]          # (height, width) of the batch the issue asks for
FORMATS = ["PNG", "JPEG", "PNG"]

SERVE_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
images = [open(path, "rb").read() for path in sys.argv[3:]]
batch = serve(image_bytes=tf.constant(images))
alone = [serve(image_bytes=tf.constant([image]))["class_map"].numpy()[0] for image in images]
np.savez(sys.argv[2], class_map=batch["class_map"].numpy(), height=batch["height"].numpy(),
         width=batch["width"].numpy(), **{f"alone_{i}": a for i, a in enumerate(alone)})
"""


@pytest.fixture(scope="module")
def job(segmentation_run, tmp_path_factory):
    out, _ = segmentation_run
    result, job_dir, _ = segmentation_job(out, tmp_path_factory)
    return result["export"], job_dir, out


def _test_images(out):
    """Decoded RGB test-split images of the sample corpus (uint8 arrays), in shard order."""
    manifest = json.loads((out / "manifest.json").read_text())
    images = []
    for shard in manifest["splits"]["test"]["shards"]:
        for raw in tf.data.TFRecordDataset(str(out / shard["path"])):
            example = tf.train.Example.FromString(raw.numpy())
            encoded = example.features.feature["image/encoded"].bytes_list.value[0]
            images.append(np.asarray(Image.open(io.BytesIO(encoded)).convert("RGB")))
    return images


def _encode(pixels, fmt):
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, fmt, **({"quality": 92} if fmt == "JPEG" else {}))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def batch_images(job, tmp_path_factory):
    """Three files cut from real test images: 360x480 PNG, 375x500 JPEG, 17x23 PNG; and their pixels."""
    _, _, out = job
    photos = _test_images(out)
    first = next(p for p in photos if p.shape[:2] == (360, 480))
    large = next(p for p in photos if p.shape[0] >= 375 and p.shape[1] >= 500)
    pixels = [first, large[:375, :500], first[100:117, 200:223]]
    folder = tmp_path_factory.mktemp("batch_images")
    paths = []
    for index, (image, fmt) in enumerate(zip(pixels, FORMATS)):
        assert image.shape[:2] == SIZES[index]
        paths.append(folder / f"image{index}.{fmt.lower()}")
        paths[-1].write_bytes(_encode(np.ascontiguousarray(image), fmt))
    return paths, pixels


def test_a_batch_of_three_sizes_gives_each_image_its_own_class_map_in_a_fresh_process(job, batch_images, tmp_path):
    export, _, _ = job
    paths, _ = batch_images
    result = tmp_path / "served.npz"
    completed = subprocess.run([sys.executable, "-c", SERVE_SCRIPT, export, str(result), *map(str, paths)],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    served = np.load(result)
    class_map = served["class_map"]
    assert class_map.shape == (3, 375, 500) and class_map.dtype == np.int32
    assert [tuple(pair) for pair in zip(served["height"], served["width"])] == SIZES
    for index, (height, width) in enumerate(SIZES):
        own = class_map[index, :height, :width]
        assert own.min() >= 0 and own.max() < NUM_CLASSES          # every pixel of the image gets a class
        assert (class_map[index, height:, :] == -1).all()           # the rest of the batch output is padding
        assert (class_map[index, :, width:] == -1).all()
        alone = served[f"alone_{index}"]
        assert alone.shape == (height, width)                        # alone: exactly the image's own size
        np.testing.assert_array_equal(own, alone)                    # the batch does not change an image's map


def _in_process_class_map(job_dir, pixels, mean, std, pad_mode="symmetric"):
    """The trained Keras model (last checkpoint) on pixels normalised with stats.json and padded with numpy."""
    from trainer.models.networks import ModelConfig, build_model
    model = build_model("segmentation", NUM_CLASSES, ModelConfig(depth=SEGMENTATION["depth"],
                                                                 width=SEGMENTATION["width"]))
    model.load_weights(str(sorted((job_dir / "checkpoints").glob("epoch-*.weights.h5"))[-1]))
    height, width = pixels.shape[:2]
    image = (pixels.astype(np.float32) - mean) / std if mean is not None else pixels.astype(np.float32)
    padding = ((0, -height % MULTIPLE), (0, -width % MULTIPLE), (0, 0))
    image = np.pad(image, padding, mode=pad_mode)
    logits = model(image[np.newaxis], training=False).numpy()[0]
    return logits[:height, :width].argmax(axis=-1)


def test_served_class_maps_equal_the_trained_model_on_training_normalisation(job, batch_images):
    export, job_dir, out = job
    paths, pixels = batch_images
    stats = json.loads((dataset_dir(out) / "stats.json").read_text())
    mean = np.array(stats["image_mean"], np.float32)
    std = np.array(stats["image_std"], np.float32)
    serve = tf.saved_model.load(export).signatures["serving_default"]
    for index in (0, 2):                                            # the PNGs: pixels exactly as decoded here
        height, width = SIZES[index]
        served = serve(image_bytes=tf.constant([paths[index].read_bytes()]))["class_map"].numpy()[0]
        expected = _in_process_class_map(job_dir, pixels[index], mean, std)
        agreement = np.mean(served == expected)
        assert agreement >= 0.999, (index, agreement)
        # The comparison has teeth: without the normalisation, the same model labels the pixels otherwise.
        if index == 0:
            unnormalised = _in_process_class_map(job_dir, pixels[index], None, None)
            assert np.mean(served == unnormalised) < 0.9
            assert len(np.unique(expected)) >= 2                     # not a constant map


def _post(port, payload):
    request = urllib.request.Request(f"http://localhost:{port}/v1/models/model:predict",
                                     data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _b64(data: bytes) -> dict:
    return {"b64": base64.b64encode(data).decode()}


def _png_header_claiming(height, width) -> bytes:
    """The first bytes of a PNG whose IHDR declares height x width (a decompression-bomb header)."""
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + len(ihdr).to_bytes(4, "big") + b"IHDR" + ihdr + b"\0" * 4


def test_rest_server_answers_a_batch_and_refuses_bad_requests_without_dying(job, batch_images):
    export, _, _ = job
    paths, _ = batch_images
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "trainer.serve", "--model", export, "--port", str(port)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, server, timeout=180)
        good = [_b64(path.read_bytes()) for path in paths]
        status, answer = _post(port, {"instances": good})
        assert status == 200, answer
        predictions = answer["predictions"]
        assert [(p["height"], p["width"]) for p in predictions] == SIZES
        first = np.array(predictions[0]["class_map"])
        assert first.shape == (375, 500) and (first[360:] == -1).all() and (first[:360, :480] >= 0).all()

        truncated = paths[1].read_bytes()[:len(paths[1].read_bytes()) // 3]
        refused = [
            ({"instances": [good[0], _b64(b"plain text, not an image")]},
             "entry 1 (0-based) of the request is not a JPEG or PNG image"),
            ({"instances": [_b64(_png_header_claiming(20000, 20000))]},
             "entry 0 is 20000x20000 (400,000,000 pixels), over the served limit"),
            ({"instances": [_b64(truncated)]}, "JPEG"),
            ({"instances": [{"b64": "***"}]}, "base64"),
            ({"images": good}, '"instances" or "inputs"'),
        ]
        for payload, message in refused:
            status, answer = _post(port, payload)
            assert status == 400 and message in answer["error"], (message, status, answer)
        assert server.poll() is None                                 # still serving
        status, again = _post(port, {"inputs": {"image_bytes": good[:1]}})
        assert status == 200
        np.testing.assert_array_equal(np.array(again["outputs"]["class_map"][0]), first[:360, :480])
    finally:
        stop_process_group(server)
