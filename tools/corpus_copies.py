"""Distinct copies of a corpus, for scale benchmarks (not shipped): new bytes, the same pixels.

``python -m tools.corpus_copies LISTING OUT --pairs N`` writes ``N`` pairs into ``OUT`` by copying
the pairs of ``LISTING`` (a CSV with ``image`` and ``mask`` columns, such as the photo corpus's
``png.csv``) round after round. Copy ``k`` of a PNG gets one ``tEXt`` chunk after its ``IHDR``
(keyword ``copy``, value ``k``), of a JPEG one ``COM`` segment after its ``SOI``: the file's bytes
and SHA-256 differ from every other copy (so no pair is a duplicate of another), its pixels and its
decoding cost do not. Round 0 keeps the files as they are. Files go to ``OUT/images/<round>/`` and
``OUT/masks/<round>/``, a thousand rounds' worth of folders at most, and ``OUT/listing.csv`` lists
them (paths relative to ``OUT``).

``--filler_rows M`` adds ``M`` rows that name files that do not exist and that the filter
``--filter "source == 'real'"`` leaves out (column ``source``: ``real`` for the copies,
``other`` for the filler), to time discovery over a listing of many rows of which few are selected;
``--format parquet`` writes ``OUT/listing.parquet`` instead (row groups of 1M rows, pyarrow's default).
Pair ``i`` depends only on the source listing and ``i``, so the same arguments give the same files.
"""

import argparse
import concurrent.futures
import csv
import os
import struct
import sys
import zlib
from typing import List, Optional, Sequence, Tuple

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FILTER = "source == 'real'"


def png_copy(data: bytes, copy: int) -> bytes:
    """``data`` (a PNG) with a ``tEXt`` chunk naming ``copy`` after its ``IHDR``; round 0 is ``data``."""
    if copy == 0:
        return data
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    ihdr_end = len(PNG_SIGNATURE) + 8 + struct.unpack(">I", data[8:12])[0] + 4
    payload = b"copy\x00" + str(copy).encode("ascii")
    chunk = struct.pack(">I", len(payload)) + b"tEXt" + payload + struct.pack(">I", zlib.crc32(b"tEXt" + payload))
    return data[:ihdr_end] + chunk + data[ihdr_end:]


def jpeg_copy(data: bytes, copy: int) -> bytes:
    """``data`` (a JPEG) with a ``COM`` segment naming ``copy`` after its ``SOI``; round 0 is ``data``."""
    if copy == 0:
        return data
    if not data.startswith(b"\xff\xd8"):
        raise ValueError("not a JPEG")
    comment = f"copy {copy}".encode("ascii")
    return data[:2] + b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment + data[2:]


def file_copy(data: bytes, copy: int) -> bytes:
    return png_copy(data, copy) if data.startswith(PNG_SIGNATURE) else jpeg_copy(data, copy)


def _source_pairs(listing: str) -> List[Tuple[str, str]]:
    root = os.path.dirname(os.path.abspath(listing))
    with open(listing, newline="", encoding="utf-8") as handle:
        return [(os.path.join(root, row["image"]), os.path.join(root, row["mask"])) for row in csv.DictReader(handle)]


def _write_round(out: str, sources: Sequence[Tuple[str, str]], round_index: int) -> List[Tuple[str, str]]:
    rows = []
    for kind in ("images", "masks"):
        os.makedirs(os.path.join(out, kind, f"{round_index:04d}"), exist_ok=True)
    for image, mask in sources:
        written = []
        for kind, path in (("images", image), ("masks", mask)):
            relative = f"{kind}/{round_index:04d}/{os.path.basename(path)}"
            with open(path, "rb") as handle:
                data = file_copy(handle.read(), round_index)
            with open(os.path.join(out, relative), "wb") as handle:
                handle.write(data)
            written.append(relative)
        rows.append((written[0], written[1]))
    return rows


def write_copies(listing: str, out: str, pairs: int, workers: int = 0) -> List[Tuple[str, str]]:
    """Write ``pairs`` copies of ``listing``'s pairs into ``out``; returns (image, mask) relative to ``out``."""
    sources = _source_pairs(listing)
    if not sources:
        raise ValueError(f"{listing} lists no pairs")
    rounds = [(r, sources[:max(0, min(len(sources), pairs - r * len(sources)))])
              for r in range(-(-pairs // len(sources)))]
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        done = list(pool.map(lambda item: _write_round(out, item[1], item[0]), rounds))
    return [row for round_rows in done for row in round_rows]


def write_listing(path: str, rows: Sequence[Tuple[str, str]], filler_rows: int) -> str:
    """The listing at ``path`` (.csv or .parquet) of ``rows`` (source ``real``) and ``filler_rows`` rows of
    missing files (source ``other``)."""
    images = [image for image, _ in rows] + [f"images/filler/{i:09d}.png" for i in range(filler_rows)]
    masks = [mask for _, mask in rows] + [f"masks/filler/{i:09d}.png" for i in range(filler_rows)]
    sources = ["real"] * len(rows) + ["other"] * filler_rows
    if path.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"image": images, "mask": masks, "source": sources}), path)
        return path
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "mask", "source"])
        writer.writerows(zip(images, masks, sources))
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.corpus_copies", description=__doc__.split("\n\n")[0])
    parser.add_argument("listing", help="a CSV listing with image and mask columns (e.g. the photo corpus's png.csv)")
    parser.add_argument("out", help="the folder to write the copies and their listing into")
    parser.add_argument("--pairs", type=int, required=True, help="how many pairs to write")
    parser.add_argument("--filler_rows", type=int, default=0,
                        help=f"rows of missing files that --filter \"{FILTER}\" leaves out (default 0)")
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="the listing's format")
    parser.add_argument("--workers", type=int, default=0, help="threads writing copies (default: one per core)")
    args = parser.parse_args(argv)
    rows = write_copies(args.listing, args.out, args.pairs, args.workers)
    path = write_listing(os.path.join(args.out, f"listing.{args.format}"), rows, args.filler_rows)
    print(f"{path}: {len(rows):,} pairs and {args.filler_rows:,} filler rows; select with --filter \"{FILTER}\"")
    return 0


if __name__ == "__main__":
    sys.exit(main())
