"""What the sample corpus holds: class ids and names, image sizes and formats, file and folder
names, the valid-but-unusual pairs and the deliberately broken inputs, for the segmentation and
the classification parts (the package docstring describes the corpus these constants make).
"""

from __future__ import annotations

# --------------------------------------------------------------------------
# Segmentation constants
# --------------------------------------------------------------------------
CLASS_NAMES: tuple[str, ...] = (
    "background",
    "sky",
    "road",
    "building",
    "vegetation",
    "vehicle",
    "person",
    "sign",
)
NUM_CLASSES: int = len(CLASS_NAMES)
BACKGROUND_CLASS: int = 0
SKY, ROAD, BUILDING, VEGETATION, VEHICLE, PERSON, SIGN = range(1, 8)
RAREST_CLASS: int = SIGN
IGNORE_LABEL: int = 255
BAD_LABEL: int = 9  # value written into broken_badlabel's mask

RAREST_CLASS_IMAGE_FRACTION: float = 0.025
# Probability that a (regular) scene contains each non-background, non-rare class.
CLASS_PRESENCE: dict[int, float] = {
    SKY: 0.85,
    ROAD: 0.75,
    BUILDING: 0.6,
    VEGETATION: 0.5,
    VEHICLE: 0.35,
    PERSON: 0.15,
}
IGNORE_BAND_PROBABILITY: float = 0.6
IGNORE_BAND_CLASSES: tuple[int, ...] = (BUILDING, VEGETATION, VEHICLE, PERSON)

IMAGE_SIZES: tuple[tuple[int, int], ...] = ((480, 360), (512, 384), (640, 480))  # (W, H)
IMAGE_SIZE_WEIGHTS: tuple[float, ...] = (0.5, 0.3, 0.2)
PNG_FRACTION: float = 0.4
JPEG_QUALITY: int = 90
PNG_IMAGE_COMPRESS_LEVEL: int = 1  # zlib level for photo PNGs (level 6 is ~5x slower, barely smaller)
PNG_MASK_COMPRESS_LEVEL: int = 1  # zlib level for 8-bit label masks (files stay ~3 KB)

SOURCES: tuple[str, ...] = ("camA", "camB", "camC")
CAPTURE_YEARS: tuple[int, ...] = tuple(range(2018, 2024))
SPLITS: tuple[str, ...] = ("train", "val", "test")
SPLIT_FRACTIONS: tuple[float, ...] = (0.8, 0.1, 0.1)
SEGMENTATION_MANIFEST_COLUMNS: tuple[str, ...] = ("image", "mask", "source", "capture_year", "split")

SEGMENTATION_DIR: str = "segmentation"
CLASSIFICATION_DIR: str = "classification"
OUTSIDE_DIR: str = "outside"
LISTING_NAME: str = "manifest.csv"
README_NAME: str = "README.txt"

# Valid-but-unusual pairs: stem -> kind.
UNUSUAL_PAIRS: tuple[tuple[str, str], ...] = (
    ("gray_000", "gray"),
    ("gray_001", "gray"),
    ("rgba_000", "rgba"),
    ("rgba_001", "rgba"),
    ("palette_000", "palette"),
    ("palette_001", "palette"),
    ("mask16_000", "mask16"),
)
MIN_NUM_PAIRS: int = len(UNUSUAL_PAIRS) + 3

BOMB_SIZE: int = 20000
PNG_SIGNATURE: bytes = b"\x89PNG\r\n\x1a\n"
SIZEMISMATCH_IMAGE_SIZE: tuple[int, int] = (480, 360)
SIZEMISMATCH_MASK_SIZE: tuple[int, int] = (320, 240)
DUP_COPY_STEM: str = "dup_copy"
ESCAPE_STEM: str = "escape"
ESCAPE_IMAGE_REL: str = "../outside/escape.jpg"
ORPHAN_IMAGE_STEM: str = "orphan_image"
ORPHAN_MASK_STEM: str = "orphan_mask"

# Broken segmentation inputs: stem -> why it is broken (also written to README.txt).
BROKEN_SEGMENTATION_INPUTS: dict[str, str] = {
    "broken_truncated": "images/broken_truncated.jpg is a JPEG cut to half its bytes (mask is valid).",
    "broken_notimage": "images/broken_notimage.jpg holds plain text, not an image (mask is valid).",
    "broken_gif": "images/broken_gif.png is a GIF file with a .png extension (mask is valid).",
    "broken_bomb": (
        f"images/broken_bomb.png declares {BOMB_SIZE}x{BOMB_SIZE} pixels (mode L, all zeros): "
        "a decompression bomb (mask is a small valid mask)."
    ),
    "broken_sizemismatch": "image is 480x360 but masks/broken_sizemismatch.png is 320x240.",
    "broken_badlabel": f"mask contains label {BAD_LABEL} (valid ids are 0..7 and 255).",
    "broken_rgbmask": "masks/broken_rgbmask.png is an RGB (3-channel) PNG.",
    "broken_emptymask": "masks/broken_emptymask.png is an empty (0-byte) file.",
    "broken_missingmask": "listed in manifest.csv but masks/broken_missingmask.png does not exist.",
    ORPHAN_IMAGE_STEM: "images/orphan_image.jpg has no mask and is NOT in manifest.csv.",
    ORPHAN_MASK_STEM: "masks/orphan_mask.png has no image and is NOT in manifest.csv.",
    DUP_COPY_STEM: "image and mask are byte-identical copies of another valid pair (listed in manifest.csv).",
    ESCAPE_STEM: (
        f"manifest row image path {ESCAPE_IMAGE_REL} escapes the manifest folder; "
        "masks/escape.png has no image in images/ (an orphan mask for the paired-folder form)."
    ),
}
# Image file name of each broken stem that has an image in images/.
BROKEN_IMAGE_FILES: dict[str, str] = {
    "broken_truncated": "broken_truncated.jpg",
    "broken_notimage": "broken_notimage.jpg",
    "broken_gif": "broken_gif.png",
    "broken_bomb": "broken_bomb.png",
    "broken_sizemismatch": "broken_sizemismatch.jpg",
    "broken_badlabel": "broken_badlabel.jpg",
    "broken_rgbmask": "broken_rgbmask.jpg",
    "broken_emptymask": "broken_emptymask.jpg",
    "broken_missingmask": "broken_missingmask.jpg",
}

# --------------------------------------------------------------------------
# Classification constants
# --------------------------------------------------------------------------
CLASSIFICATION_CLASSES: tuple[str, ...] = (
    "pizza",
    "sushi",
    "ramen",
    "french_fries",
    "caesar_salad",
    "apple_pie",
    "guacamole",
    "chocolate_cake",
)
CLASSIFICATION_IMBALANCE: float = 10.0  # largest class / smallest class (target)
CLASSIFICATION_SIZE_RANGE: tuple[int, int] = (256, 384)  # inclusive, per side
CLASSIFICATION_JPEG_QUALITY_RANGE: tuple[int, int] = (75, 95)  # inclusive
CLASSIFICATION_MANIFEST_COLUMNS: tuple[str, ...] = ("image", "label", "source")
BROKEN_CLASSIFICATION_INPUTS: dict[str, str] = {
    f"images/{CLASSIFICATION_CLASSES[0]}/broken_truncated.jpg": "JPEG cut to half its bytes.",
    f"images/{CLASSIFICATION_CLASSES[1]}/broken_notimage.jpg": "plain text with a .jpg extension.",
}
CLASSIFICATION_GRAY_IMAGE: str = f"images/{CLASSIFICATION_CLASSES[2]}/gray_000.jpg"
# Files written once on top of the regular images: (path, kind).
CLASSIFICATION_EXTRA_FILES: tuple[tuple[str, str], ...] = (
    (CLASSIFICATION_GRAY_IMAGE, "gray"),
    (f"images/{CLASSIFICATION_CLASSES[0]}/broken_truncated.jpg", "truncated"),
    (f"images/{CLASSIFICATION_CLASSES[1]}/broken_notimage.jpg", "text"),
)
