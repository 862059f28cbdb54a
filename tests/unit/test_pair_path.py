"""One pair's path from discovery to its shard record (issue 9): at most 5 product files, none visited twice.

The path is what tools/pair_path.py traces with sys.setprofile: the product
files that the per-pair module (beam_pipeline/stages/pairs.py) hands the pair's work
to, in order, while it is discovered, selected, checked and encoded.
"""

import io

import numpy as np
import pytest
from PIL import Image

from tools.pair_path import trace_pair


def _png(array, mode=None):
    out = io.BytesIO()
    (Image.fromarray(array, mode) if mode else Image.fromarray(array)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def listing(tmp_path):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    mask = (rng.integers(0, 3, (24, 32))).astype(np.uint8)
    (tmp_path / "plain.png").write_bytes(_png(rgb))
    (tmp_path / "plain_mask.png").write_bytes(_png(mask))
    grey = Image.fromarray(rgb[..., 0], "L")            # converted to RGB at validation and again when written
    out = io.BytesIO()
    grey.save(out, format="JPEG", quality=90)
    (tmp_path / "grey.jpg").write_bytes(out.getvalue())
    (tmp_path / "grey_mask.png").write_bytes(_png(mask.astype(np.uint16)))    # a 16-bit mask: converted too
    path = tmp_path / "listing.csv"
    path.write_text("image,mask\nplain.png,plain_mask.png\ngrey.jpg,grey_mask.png\n")
    return str(path)


# Image and mask are opened through the file-access layer at check, and again at record (digests compared),
# converted files too: no file's bytes cross a shuffle.
@pytest.mark.parametrize("row,reads", [(0, ["check", "check", "record", "record"]),
                                       (1, ["check", "check", "record", "record"])],
                         ids=["stored_as_read", "converted"])
def test_one_pairs_path_has_at_most_five_files_and_no_revisit(listing, row, reads):
    result = trace_pair(listing, num_classes=3, row=row)
    assert result.written
    assert result.files == ["beam_pipeline/stages/pairs.py", "beam_pipeline/io/listing.py",
                            "beam_pipeline/core/selection.py", "beam_pipeline/core/validation.py",
                            "beam_pipeline/core/example.py"]
    assert result.revisits == []
    assert result.reads == reads
    assert {"beam_pipeline/core/pixels.py", "beam_pipeline/core/images.py"} <= set(result.footprint)   # the decoding,
    # below validation and records
