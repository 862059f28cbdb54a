"""The whole sample corpus: :func:`write_corpus` checks the arguments, clears or refuses an existing
output, writes the segmentation and classification parts and returns their summary.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tools.sample_corpus.classification import write_classification
from tools.sample_corpus.files import _dir_stats
from tools.sample_corpus.segmentation import write_segmentation
from tools.sample_corpus.spec import CLASSIFICATION_CLASSES, CLASSIFICATION_DIR, MIN_NUM_PAIRS, OUTSIDE_DIR, SEGMENTATION_DIR

# ==========================================================================
# Entry points
# ==========================================================================
def _prepare_out_dir(out_dir: Path, overwrite: bool) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (SEGMENTATION_DIR, CLASSIFICATION_DIR, OUTSIDE_DIR):
        target = out_dir / name
        if not target.exists():
            continue
        if not overwrite and any(target.iterdir()):
            raise FileExistsError(f"{target} already exists and is not empty (use overwrite=True / --overwrite)")
        shutil.rmtree(target)


def write_corpus(
    out_dir: str | Path,
    seed: int = 0,
    num_pairs: int = 240,
    num_class_images: int = 400,
    scale: int = 1,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the segmentation and classification corpora under ``out_dir``.

    ``num_pairs * scale`` distinct valid segmentation pairs (the 7 unusual ones
    included) and ``num_class_images * scale`` valid classification images are
    written; broken inputs are written once.  Returns a summary dict.
    """
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    if num_pairs * scale < MIN_NUM_PAIRS:
        raise ValueError(f"num_pairs * scale must be >= {MIN_NUM_PAIRS}, got {num_pairs * scale}")
    if num_class_images * scale < len(CLASSIFICATION_CLASSES):
        raise ValueError(f"num_class_images * scale must be >= {len(CLASSIFICATION_CLASSES)}")
    out = Path(out_dir)
    _prepare_out_dir(out, overwrite)
    segmentation = write_segmentation(out, seed, num_pairs * scale)
    classification = write_classification(out, seed, num_class_images * scale)
    totals = [_dir_stats(out / name) for name in (SEGMENTATION_DIR, CLASSIFICATION_DIR, OUTSIDE_DIR)]
    return {
        "out_dir": str(out),
        "seed": seed,
        "scale": scale,
        "segmentation": segmentation,
        "classification": classification,
        "files": sum(t["files"] for t in totals),
        "bytes": sum(t["bytes"] for t in totals),
    }
