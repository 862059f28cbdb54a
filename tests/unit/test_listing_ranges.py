"""A listing read in ranges (io/listing.py, issue 20): any cut of a listing reads every row once.

The listings are written here, row by row, so the expected rows are the test's own; each kind is cut
at every kind of place (mid-line, at a line start, inside a row group, at the header's end), and read
through Beam's OffsetRestrictionTracker the way ReadListingFn reads it, split while it is read.
"""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker

from beam_pipeline.core import reasons
from beam_pipeline.io import listing

ROWS = 3000


def expected_rows(n: int = ROWS):
    return [{"image": f"images/{i:05d}.png", "mask": f"masks/{i:05d}.png", "source": f"cam{i % 3}"}
            for i in range(n)]


def write_listing(tmp_path, kind: str, rows) -> str:
    path = tmp_path / f"listing.{kind}"
    if kind == "csv":
        lines = ["image,mask,source"] + [f"{r['image']},{r['mask']},{r['source']}" for r in rows]
        path.write_text("\n".join(lines) + "\n")
    elif kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=700)
    return str(path)


def read_all(path: str, start: int, stop: int):
    return [row for batch in listing.read_range(path, start, stop, lambda p: True) for row in batch.rows]


@pytest.fixture(params=["csv", "jsonl", "parquet"])
def kind(request):
    return request.param


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(listing, "BATCH_ROWS", 97)          # several batches per range, batches across groups


def test_the_whole_extent_reads_every_row_in_order(tmp_path, kind):
    path = write_listing(tmp_path, kind, expected_rows())
    whole = listing.extent(path)
    assert whole.unit == ("rows" if kind == "parquet" else "bytes")
    assert read_all(path, whole.start, whole.stop) == expected_rows()


@pytest.mark.parametrize("seed", range(5))
def test_any_cut_into_ranges_reads_every_row_exactly_once(tmp_path, kind, seed):
    path = write_listing(tmp_path, kind, expected_rows())
    whole = listing.extent(path)
    cuts = sorted(random.Random(seed).sample(range(whole.start + 1, whole.stop), 40))
    edges = [whole.start, *cuts, whole.stop]
    found = [row for a, b in zip(edges, edges[1:]) for row in read_all(path, a, b)]
    assert found == expected_rows()


def test_a_cut_exactly_at_a_line_start_keeps_that_line_in_the_second_range(tmp_path):
    path = write_listing(tmp_path, "csv", expected_rows(3))
    header = len("image,mask,source\n")
    second_line = header + len("images/00000.png,masks/00000.png,cam0\n")
    assert [r["image"] for r in read_all(path, header, second_line)] == ["images/00000.png"]
    assert [r["image"] for r in read_all(path, second_line, second_line + 1)] == ["images/00001.png"]


def test_the_first_ranges_cover_the_extent_and_are_not_too_small(tmp_path, kind, monkeypatch):
    monkeypatch.setattr(listing, "MIN_RANGE_BYTES", 4096)
    monkeypatch.setattr(listing, "MIN_RANGE_ROWS", 256)
    path = write_listing(tmp_path, kind, expected_rows())
    whole = listing.extent(path)
    ranges = listing.split_points(whole)
    assert ranges[0][0] == whole.start and ranges[-1][1] == whole.stop
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert 2 <= len(ranges) <= listing.RANGES_PER_LISTING
    assert [row for a, b in ranges for row in read_all(path, a, b)] == expected_rows()


def test_a_tiny_listing_is_one_range(tmp_path, kind):
    path = write_listing(tmp_path, kind, expected_rows(5))
    whole = listing.extent(path)
    assert listing.split_points(whole) == [(whole.start, whole.stop)]


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_a_range_split_while_it_is_read_reads_every_row_once(tmp_path, kind, fraction):
    """The runner's dynamic split: the primary stops where the tracker was cut, the residual goes on."""
    path = write_listing(tmp_path, kind, expected_rows())
    whole = listing.extent(path)
    tracker = OffsetRestrictionTracker(OffsetRange(whole.start, whole.stop))
    primary, split_done = [], False
    for batch in listing.read_range(path, whole.start, whole.stop, tracker.try_claim):
        primary.extend(batch.rows)
        if not split_done and len(primary) >= 500:
            _, residual = tracker.try_split(fraction)
            split_done = True
    tracker.check_done()
    assert split_done and len(primary) < ROWS
    rest = OffsetRestrictionTracker(residual)
    secondary = [row for batch in listing.read_range(path, residual.start, residual.stop, rest.try_claim)
                 for row in batch.rows]
    rest.check_done()
    assert primary + secondary == expected_rows()


def test_a_claim_refused_ends_the_range_at_that_row(tmp_path, kind):
    """Every row's position is claimed before it is parsed; the first refusal ends the range there."""
    path = write_listing(tmp_path, kind, expected_rows())
    whole = listing.extent(path)
    claimed = []

    def claim(position):
        claimed.append(position)
        return len(claimed) < 300
    rows = [row for batch in listing.read_range(path, whole.start, whole.stop, claim) for row in batch.rows]
    assert len(claimed) == 300 and claimed == sorted(claimed)
    assert rows == expected_rows()[:299]


def test_csv_lines_that_are_not_rows_are_rejected_with_their_text(tmp_path):
    path = tmp_path / "listing.csv"
    path.write_text("image,mask\na.png,a_mask.png\nb.png,b_mask.png,extra\nc.png\n\"d,1.png\",d_mask.png\n"
                    "\"e.png,e_mask.png\nf.png,f_mask.png\n")
    found = list(listing.listed_pairs(str(path), *_whole(path), lambda p: True, str(tmp_path), "segmentation",
                                      False))
    refs = sorted(item.image for item in found if not hasattr(item, "status"))
    bad = sorted((item.reason, item.key) for item in found if hasattr(item, "status"))
    assert [ref.rsplit("/", 1)[1] for ref in refs] == ["a.png", "d,1.png", "f.png"]
    assert bad == [(reasons.BAD_LISTING_ROW, 'line:"e.png,e_mask.png'),
                   (reasons.BAD_LISTING_ROW, "line:b.png,b_mask.png,extra"),
                   (reasons.BAD_LISTING_ROW, "line:c.png")]
    details = {item.key: item.detail for item in found if hasattr(item, "status")}
    assert "3 values where the header has 2" in details["line:b.png,b_mask.png,extra"]


def test_jsonl_lines_that_are_not_json_are_rejected_and_the_others_read(tmp_path):
    path = tmp_path / "listing.jsonl"
    path.write_text('{"image": "a.png", "mask": "am.png"}\nnot json\n\n{"image": "b.png", "mask": "bm.png"}\n')
    found = list(listing.listed_pairs(str(path), *_whole(path), lambda p: True, str(tmp_path), "segmentation",
                                      False))
    assert sorted(item.key for item in found) == ["a.png|am.png", "b.png|bm.png", "line:not json"]


def _whole(path):
    whole = listing.extent(str(path))
    return whole.start, whole.stop
