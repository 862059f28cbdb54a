"""Tests for tools.sample_corpus (the sample corpus generator).

Every expectation is checked by reading the written files back with numpy and
Pillow (or raw bytes); nothing here reuses the generator's own helpers.
"""

from __future__ import annotations

import csv
import hashlib
import struct
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, UnidentifiedImageError

from tools.sample_corpus import spec as sample_corpus
from tools.sample_corpus.__main__ import main
from tools.sample_corpus.corpus import write_corpus

NUM_PAIRS = 120
NUM_CLASS_IMAGES = 80
NUM_CLASSES = 8
RAREST = 7
IGNORE = 255
VALID_PREFIXES = ("img_", "gray_", "rgba_", "palette_", "mask16_")
ALLOWED_SIZES = {(480, 360), (512, 384), (640, 480)}
BROKEN_ROWS = (
    "broken_truncated",
    "broken_notimage",
    "broken_gif",
    "broken_bomb",
    "broken_sizemismatch",
    "broken_badlabel",
    "broken_rgbmask",
    "broken_emptymask",
    "broken_missingmask",
    "escape",
)
# valid pairs + dup_copy + the repeated row + the broken rows above
EXTRA_MANIFEST_ROWS = 2 + len(BROKEN_ROWS)


# --------------------------------------------------------------------------
# Independent readers
# --------------------------------------------------------------------------
def file_hashes(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def stem(rel: str) -> str:
    return Path(rel).stem


def is_valid_stem(name: str) -> bool:
    return name.startswith(VALID_PREFIXES)


def mask_array(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image).astype(np.int64)


def valid_mask_paths(seg: Path) -> list[Path]:
    return sorted(p for p in (seg / "masks").glob("*.png") if is_valid_stem(p.stem))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("sample_corpus")
    summary = write_corpus(out, seed=0, num_pairs=NUM_PAIRS, num_class_images=NUM_CLASS_IMAGES)
    return out, summary


@pytest.fixture(scope="module")
def seg(corpus: tuple[Path, dict]) -> Path:
    return corpus[0] / "segmentation"


@pytest.fixture(scope="module")
def manifest_rows(seg: Path) -> list[dict[str, str]]:
    return read_csv(seg / "manifest.csv")[1]


@pytest.fixture(scope="module")
def class_stats(seg: Path) -> dict[str, np.ndarray | int]:
    """Per-class image presence and pixel counts over the valid masks."""
    presence = np.zeros(256, dtype=np.int64)
    pixels = np.zeros(256, dtype=np.int64)
    masks = valid_mask_paths(seg)
    for path in masks:
        counts = np.bincount(mask_array(path).ravel(), minlength=256)
        presence += counts[:256] > 0
        pixels += counts[:256]
    return {"presence": presence, "pixels": pixels, "num_masks": len(masks)}


# --------------------------------------------------------------------------
# Determinism and API
# --------------------------------------------------------------------------
def test_constants_match_the_spec() -> None:
    assert len(sample_corpus.CLASS_NAMES) == NUM_CLASSES
    assert sample_corpus.CLASS_NAMES[0] == "background"
    assert sample_corpus.RAREST_CLASS == RAREST
    assert sample_corpus.IGNORE_LABEL == IGNORE
    assert len(sample_corpus.CLASSIFICATION_CLASSES) >= 8


def test_same_arguments_give_byte_identical_files(corpus: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = corpus
    write_corpus(tmp_path, seed=0, num_pairs=NUM_PAIRS, num_class_images=NUM_CLASS_IMAGES)
    first, second = file_hashes(out), file_hashes(tmp_path)
    assert len(first) > 2 * NUM_PAIRS + NUM_CLASS_IMAGES
    assert first == second


def test_summary_matches_files(corpus: tuple[Path, dict], seg: Path) -> None:
    out, summary = corpus
    files = [p for p in out.rglob("*") if p.is_file()]
    assert summary["files"] == len(files)
    assert summary["bytes"] == sum(p.stat().st_size for p in files)
    assert summary["segmentation"]["valid_pairs"] == NUM_PAIRS
    assert len(valid_mask_paths(seg)) == NUM_PAIRS
    assert sum(summary["classification"]["per_class"].values()) == NUM_CLASS_IMAGES


def test_existing_output_is_not_clobbered_without_overwrite(tmp_path: Path) -> None:
    (tmp_path / "segmentation").mkdir()
    (tmp_path / "segmentation" / "keep.txt").write_text("user data")
    with pytest.raises(FileExistsError):
        write_corpus(tmp_path, num_pairs=12, num_class_images=8)
    assert (tmp_path / "segmentation" / "keep.txt").exists()


# --------------------------------------------------------------------------
# Segmentation: valid pairs and class statistics
# --------------------------------------------------------------------------
def test_valid_pairs_are_well_formed(seg: Path, manifest_rows: list[dict[str, str]]) -> None:
    valid_rows = {row["image"]: row for row in manifest_rows if is_valid_stem(stem(row["image"]))}
    assert len(valid_rows) == NUM_PAIRS
    for image_rel, row in valid_rows.items():
        with Image.open(seg / image_rel) as image:
            image.load()
            expected_format = "PNG" if image_rel.endswith(".png") else "JPEG"
            assert image.format == expected_format, image_rel
            assert image.mode in {"RGB", "L", "RGBA"}
            image_size = image.size
        with Image.open(seg / row["mask"]) as mask:
            assert mask.format == "PNG"
            assert mask.mode in {"L", "P", "I;16"}, row["mask"]  # single channel
            assert mask.size == image_size, image_rel
            values = set(np.unique(np.asarray(mask)).tolist())
        assert image_size in ALLOWED_SIZES
        assert values <= set(range(NUM_CLASSES)) | {IGNORE}, (row["mask"], values)


def test_image_formats_and_sizes_are_mixed(seg: Path) -> None:
    regular = sorted(p for p in (seg / "images").iterdir() if p.stem.startswith("img_"))
    png_fraction = sum(p.suffix == ".png" for p in regular) / len(regular)
    assert 0.25 <= png_fraction <= 0.55
    sizes = Counter(Image.open(p).size for p in regular)
    assert len(sizes) >= 2
    assert sizes[(480, 360)] < len(regular)


def test_rarest_class_is_rare_but_present(class_stats: dict) -> None:
    presence, pixels, num_masks = class_stats["presence"], class_stats["pixels"], class_stats["num_masks"]
    labelled = pixels[:NUM_CLASSES].sum()
    assert presence[RAREST] >= 1
    assert presence[RAREST] / num_masks < 0.05
    assert pixels[RAREST] / labelled < 0.005
    assert presence[RAREST] == presence[:NUM_CLASSES].min()


def test_all_classes_present_with_a_spread_of_frequencies(class_stats: dict) -> None:
    presence, num_masks = class_stats["presence"], class_stats["num_masks"]
    fractions = presence[:NUM_CLASSES] / num_masks
    assert (presence[:NUM_CLASSES] > 0).all()
    assert fractions[0] > 0.95  # background fills what is left
    assert (fractions[1:] > 0.7).sum() >= 2  # some classes in most images
    assert ((fractions > 0.15) & (fractions < 0.45)).sum() >= 1  # some in a minority
    assert presence[NUM_CLASSES:IGNORE].sum() == 0 and presence[IGNORE + 1 :].sum() == 0


def test_ignore_label_present_in_many_masks(class_stats: dict) -> None:
    presence, pixels, num_masks = class_stats["presence"], class_stats["pixels"], class_stats["num_masks"]
    assert presence[IGNORE] / num_masks > 0.3
    assert 0 < pixels[IGNORE] / pixels.sum() < 0.05


def test_image_correlates_with_mask(seg: Path) -> None:
    """Sky pixels are bluer than road pixels in the RGB images."""
    blue_minus_red = {1: [], 2: []}
    for mask_path in sorted((seg / "masks").glob("img_*.png"))[:30]:
        image_path = next((seg / "images").glob(f"{mask_path.stem}.*"))
        rgb = np.asarray(Image.open(image_path).convert("RGB")).astype(np.float64)
        mask = mask_array(mask_path)
        for class_id in blue_minus_red:
            if (mask == class_id).any():
                pixels = rgb[mask == class_id]
                blue_minus_red[class_id].append(pixels[:, 2].mean() - pixels[:, 0].mean())
    assert np.mean(blue_minus_red[1]) > np.mean(blue_minus_red[2]) + 20


# --------------------------------------------------------------------------
# Segmentation: valid-but-unusual inputs
# --------------------------------------------------------------------------
def test_unusual_images(seg: Path) -> None:
    for name in ("gray_000.jpg", "gray_001.jpg"):
        with Image.open(seg / "images" / name) as image:
            assert (image.format, image.mode) == ("JPEG", "L")
    for name in ("rgba_000.png", "rgba_001.png"):
        with Image.open(seg / "images" / name) as image:
            assert (image.format, image.mode) == ("PNG", "RGBA")


def test_palette_masks_hold_class_ids_as_indices(seg: Path) -> None:
    for name in ("palette_000.png", "palette_001.png"):
        with Image.open(seg / "masks" / name) as mask:
            assert mask.mode == "P"
            palette = np.asarray(mask.getpalette()[: 3 * NUM_CLASSES]).reshape(NUM_CLASSES, 3)
            indices = set(np.unique(np.asarray(mask)).tolist())
            rgb_values = {tuple(v) for v in np.asarray(mask.convert("RGB")).reshape(-1, 3).tolist()}
        assert indices <= set(range(NUM_CLASSES)) | {IGNORE}
        assert len(indices) >= 3 and IGNORE in indices
        grey_ids = {(i, i, i) for i in range(1, NUM_CLASSES)}
        assert not grey_ids & {tuple(c) for c in palette.tolist()}, "palette colours must differ from the ids"
        assert not rgb_values <= {(i, i, i) for i in indices}


def test_16_bit_mask(seg: Path) -> None:
    raw = (seg / "masks" / "mask16_000.png").read_bytes()
    assert raw[24] == 16  # IHDR bit depth
    with Image.open(seg / "masks" / "mask16_000.png") as mask:
        assert mask.mode == "I;16"
        values = set(np.unique(np.asarray(mask)).tolist())
    assert values <= set(range(NUM_CLASSES)) | {IGNORE}
    assert IGNORE in values and len(values) >= 3


# --------------------------------------------------------------------------
# Segmentation: broken inputs
# --------------------------------------------------------------------------
def test_truncated_jpeg_fails_to_load(seg: Path) -> None:
    path = seg / "images" / "broken_truncated.jpg"
    data = path.read_bytes()
    assert data[:2] == b"\xff\xd8" and not data.endswith(b"\xff\xd9")
    with Image.open(path) as image:
        with pytest.raises(OSError):
            image.load()
    assert (seg / "masks" / "broken_truncated.png").stat().st_size > 0


def test_text_file_named_jpg(seg: Path) -> None:
    path = seg / "images" / "broken_notimage.jpg"
    path.read_bytes().decode("ascii")
    with pytest.raises(UnidentifiedImageError):
        Image.open(path)


def test_gif_with_png_extension(seg: Path) -> None:
    path = seg / "images" / "broken_gif.png"
    assert path.read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    with Image.open(path) as image:
        assert image.format == "GIF"


def test_decompression_bomb(seg: Path) -> None:
    path = seg / "images" / "broken_bomb.png"
    data = path.read_bytes()
    assert len(data) < 1_000_000
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind, width, height, depth, colour_type = struct.unpack(">I4sIIBB", data[8:26])
    assert (length, kind, width, height, depth, colour_type) == (13, b"IHDR", 20000, 20000, 8, 0)
    with pytest.raises(Image.DecompressionBombError):
        Image.open(path)
    # The pixel stream really is 20000 rows of (filter byte + 20000 zero pixels).
    idat = b"".join(_png_chunks(data, b"IDAT"))
    decompressor = zlib.decompressobj()
    total, pending = 0, idat
    while pending:
        chunk = decompressor.decompress(pending, 1 << 24)
        assert not np.frombuffer(chunk, dtype=np.uint8).any()
        total += len(chunk)
        pending = decompressor.unconsumed_tail
    assert decompressor.eof and total == 20000 * 20001


def _png_chunks(data: bytes, wanted: bytes) -> list[bytes]:
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if kind == wanted:
            chunks.append(data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    return chunks


def test_broken_masks(seg: Path) -> None:
    images, masks = seg / "images", seg / "masks"
    assert Image.open(images / "broken_sizemismatch.jpg").size == (480, 360)
    assert Image.open(masks / "broken_sizemismatch.png").size == (320, 240)
    badlabel = Image.open(masks / "broken_badlabel.png")
    assert badlabel.mode == "L" and 9 in np.unique(np.asarray(badlabel))
    assert Image.open(masks / "broken_rgbmask.png").mode == "RGB"
    assert (masks / "broken_emptymask.png").stat().st_size == 0
    assert (images / "broken_missingmask.jpg").exists()
    assert not (masks / "broken_missingmask.png").exists()
    for name in ("broken_badlabel.jpg", "broken_rgbmask.jpg", "broken_emptymask.jpg", "broken_missingmask.jpg"):
        Image.open(images / name).load()  # the images themselves are fine


def test_orphans_escape_and_duplicates(corpus: tuple[Path, dict], seg: Path, manifest_rows: list[dict[str, str]]) -> None:
    listed = Counter(stem(row["image"]) for row in manifest_rows)
    assert (seg / "images" / "orphan_image.jpg").exists() and not list((seg / "masks").glob("orphan_image.*"))
    assert (seg / "masks" / "orphan_mask.png").exists() and not list((seg / "images").glob("orphan_mask.*"))
    assert "orphan_image" not in listed and "orphan_mask" not in listed

    escape = [row for row in manifest_rows if stem(row["image"]) == "escape"]
    assert [row["image"] for row in escape] == ["../outside/escape.jpg"]
    Image.open(corpus[0] / "outside" / "escape.jpg").load()
    assert (seg / "masks" / "escape.png").exists() and not list((seg / "images").glob("escape.*"))

    repeated = Counter(tuple(row.values()) for row in manifest_rows)
    assert [count for count in repeated.values() if count > 1] == [2]
    twice = next(row for row, count in repeated.items() if count == 2)
    assert stem(twice[0]).startswith("img_")

    dup = next(row for row in manifest_rows if stem(row["image"]) == "dup_copy")
    dup_image, dup_mask = (seg / dup["image"]).read_bytes(), (seg / dup["mask"]).read_bytes()
    originals = [
        row for row in manifest_rows
        if is_valid_stem(stem(row["image"])) and (seg / row["image"]).read_bytes() == dup_image
    ]
    assert len(originals) == 1 and (seg / originals[0]["mask"]).read_bytes() == dup_mask


def test_manifest_columns_paths_and_metadata(seg: Path, manifest_rows: list[dict[str, str]]) -> None:
    header, _ = read_csv(seg / "manifest.csv")
    assert header == ["image", "mask", "source", "capture_year", "split"]
    assert len(manifest_rows) == NUM_PAIRS + EXTRA_MANIFEST_ROWS
    for row in manifest_rows:
        for key in ("image", "mask"):
            assert not Path(row[key]).is_absolute() and "\\" not in row[key]
        assert row["source"] in {"camA", "camB", "camC"}
        assert 2018 <= int(row["capture_year"]) <= 2023
        assert row["split"] in {"train", "val", "test"}
        if stem(row["image"]) != "escape":
            assert row["image"].startswith("images/") and (seg / row["image"]).exists()
        assert row["mask"].startswith("masks/")
    listed = Counter(stem(row["image"]) for row in manifest_rows)
    assert set(BROKEN_ROWS) <= set(listed) and all(listed[name] == 1 for name in BROKEN_ROWS)
    valid = [row for row in manifest_rows if is_valid_stem(stem(row["image"]))]
    unique_valid = {row["image"]: row["split"] for row in valid}
    assert len(unique_valid) == NUM_PAIRS
    splits = Counter(unique_valid.values())
    assert abs(splits["train"] / NUM_PAIRS - 0.8) < 0.03
    assert abs(splits["val"] / NUM_PAIRS - 0.1) < 0.03 and abs(splits["test"] / NUM_PAIRS - 0.1) < 0.03
    assert len({row["source"] for row in valid}) == 3
    assert (seg / "README.txt").read_text().count("broken_") >= 9


# --------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------
def test_classification_folders_are_imbalanced(corpus: tuple[Path, dict]) -> None:
    images = corpus[0] / "classification" / "images"
    counts = {d.name: len(list(d.glob("img_*.jpg"))) for d in images.iterdir() if d.is_dir()}
    assert len(counts) >= 8
    assert sum(counts.values()) == NUM_CLASS_IMAGES
    assert min(counts.values()) >= 1
    assert max(counts.values()) >= 3 * min(counts.values())


def test_classification_images_and_manifest(corpus: tuple[Path, dict]) -> None:
    root = corpus[0] / "classification"
    header, rows = read_csv(root / "manifest.csv")
    assert header == ["image", "label", "source"]
    on_disk = {str(p.relative_to(root)) for p in (root / "images").rglob("*.jpg")}
    assert {row["image"] for row in rows} == on_disk and len(rows) == len(on_disk)
    broken, modes = [], Counter()
    for row in rows:
        assert row["image"].startswith(f"images/{row['label']}/")
        path = root / row["image"]
        try:
            with Image.open(path) as image:
                image.load()
                modes[image.mode] += 1
                assert image.format == "JPEG"
                assert 256 <= image.width <= 384 and 256 <= image.height <= 384
        except (OSError, UnidentifiedImageError):
            broken.append(path.name)
    assert sorted(broken) == ["broken_notimage.jpg", "broken_truncated.jpg"]
    assert modes["L"] == 1 and modes["RGB"] == NUM_CLASS_IMAGES


def test_classification_images_depend_on_class(corpus: tuple[Path, dict]) -> None:
    """Green dishes are greener in the middle of the plate than chocolate cake."""
    images = corpus[0] / "classification" / "images"
    green_excess = {}
    for name in ("caesar_salad", "guacamole", "chocolate_cake"):
        values = []
        for path in sorted((images / name).glob("img_*.jpg"))[:10]:
            rgb = np.asarray(Image.open(path).convert("RGB")).astype(np.float64)
            h, w = rgb.shape[:2]
            centre = rgb[h // 3 : 2 * h // 3, w // 3 : 2 * w // 3].reshape(-1, 3)
            values.append(centre[:, 1].mean() - (centre[:, 0].mean() + centre[:, 2].mean()) / 2)
        green_excess[name] = np.mean(values)
    assert green_excess["caesar_salad"] > green_excess["chocolate_cake"] + 15
    assert green_excess["guacamole"] > green_excess["chocolate_cake"] + 15


# --------------------------------------------------------------------------
# Scale and command line
# --------------------------------------------------------------------------
def test_scale_adds_distinct_pairs_and_keeps_broken_inputs_single(tmp_path: Path) -> None:
    summary = write_corpus(tmp_path, seed=3, num_pairs=15, num_class_images=16, scale=2)
    seg = tmp_path / "segmentation"
    masks = valid_mask_paths(seg)
    assert len(masks) == 30 == summary["segmentation"]["valid_pairs"]
    image_hashes = [
        hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (seg / "images").iterdir()
        if is_valid_stem(p.stem)
    ]
    assert len(image_hashes) == 30 and len(set(image_hashes)) == 30
    _, rows = read_csv(seg / "manifest.csv")
    listed = Counter(stem(row["image"]) for row in rows)
    assert all(listed[name] == 1 for name in BROKEN_ROWS)
    assert len(rows) == 30 + EXTRA_MANIFEST_ROWS
    assert len(list((seg / "images").glob("broken_*"))) == 9
    cls_images = [p for p in (tmp_path / "classification" / "images").rglob("img_*.jpg")]
    assert len(cls_images) == 32


def test_cli_help_and_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], seg: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    for option in ("OUT", "--seed", "--num_pairs", "--num_class_images", "--scale", "--overwrite"):
        assert option in help_text

    args = [str(tmp_path), "--seed", "1", "--num_pairs", "12", "--num_class_images", "10"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert str(tmp_path) in printed and "12 valid pairs" in printed
    assert len(valid_mask_paths(tmp_path / "segmentation")) == 12
    seed1 = next((tmp_path / "segmentation" / "images").glob("img_000000.*")).read_bytes()
    seed0 = next((seg / "images").glob("img_000000.*")).read_bytes()
    assert seed1 != seed0

    assert main(args) == 2  # refuses to overwrite an existing corpus
    assert "already exists" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
