"""tools/photo_corpus.py: the real-looking benchmark corpus, checked by reading its files back with Pillow."""

import csv
import io

import numpy as np
import pytest
from PIL import Image

from tools.photo_corpus import main, make_pair, write_photo_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_photo_corpus(tmp_path_factory.mktemp("photo") / "corpus", pairs=6, seed=0, workers=2)


def test_images_are_photographic_480x360_rgb(corpus):
    for index in range(6):
        png = Image.open(corpus / "images" / f"{index:06d}.png")
        jpeg = Image.open(corpus / "jpeg" / f"{index:06d}.jpg")
        assert (png.format, png.mode, png.size) == ("PNG", "RGB", (480, 360))
        assert (jpeg.format, jpeg.mode, jpeg.size) == ("JPEG", "RGB", (480, 360))
        size = (corpus / "images" / f"{index:06d}.png").stat().st_size
        assert 120_000 < size < 350_000          # textured like a photo: flat images compress far more
        pixels = np.asarray(png, dtype=np.int16)
        assert np.abs(np.diff(pixels, axis=1)).mean() > 0.5     # noise and texture, not flat colour


def test_masks_hold_class_ids_and_the_ignore_band(corpus):
    for index in range(6):
        mask = Image.open(corpus / "masks" / f"{index:06d}.png")
        assert mask.mode == ("P" if index % 5 == 4 else "L") and mask.size == (480, 360)
        values = np.unique(np.asarray(mask))
        assert 255 in values and 1 <= len(values) - 1 <= 6      # 3-6 regions, one class each
        assert set(values.tolist()) - {255} <= set(range(8))


def test_listings_pair_each_image_with_its_mask(corpus):
    for listing, folder, suffix in (("png.csv", "images", ".png"), ("jpeg.csv", "jpeg", ".jpg")):
        rows = list(csv.DictReader((corpus / listing).open()))
        assert [(r["image"], r["mask"]) for r in rows] == \
            [(f"{folder}/{i:06d}{suffix}", f"masks/{i:06d}.png") for i in range(6)]


def test_pairs_depend_only_on_seed_and_index(corpus, tmp_path):
    small = write_photo_corpus(tmp_path / "small", pairs=3, seed=0, workers=1)
    for index in range(3):
        for folder, suffix in (("images", ".png"), ("jpeg", ".jpg"), ("masks", ".png")):
            name = f"{folder}/{index:06d}{suffix}"
            assert (small / name).read_bytes() == (corpus / name).read_bytes()
    png, _, _ = make_pair(5, seed=1)
    assert png != (corpus / "images" / "000005.png").read_bytes()
    assert np.asarray(Image.open(io.BytesIO(png))).shape == (360, 480, 3)


def test_command_line_refuses_an_existing_folder(corpus, capsys):
    assert main([str(corpus), "--pairs", "1"]) == 2
    assert "exists" in capsys.readouterr().err
