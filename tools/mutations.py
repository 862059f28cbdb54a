"""Seeded, structure-aware mutations of PNG and JPEG files: the broken inputs on which decoders disagree (not shipped).

``mutated_files(seed=0)`` -> {file name: bytes}, deterministic. The seeds are small crops of a real-looking
photo and its mask (tools/photo_corpus.py): an RGB PNG, an interlaced (Adam7) RGB PNG, a grey mask, a
palette mask, a baseline and a progressive JPEG. Each is mutated the ways files break in the wild: bit rot
in the pixel data (with the CRC left wrong, or recomputed so only the zlib checksum notices), truncation,
bad CRCs of critical and ancillary chunks, a bad zlib Adler-32, a cut or over-long zlib stream, a missing
IEND, bytes or chunks after IEND, wrong IHDR sizes and depths, a second IHDR, unknown chunks, bad filter
bytes, too little or too much image data, palette faults (a short palette, none, a transparency table
longer than the palette); for JPEG bit rot in the scan, truncation, no EOI, bytes after EOI, broken
quantisation and Huffman tables and frame sizes. ``python -m tools.mutations OUT`` writes them to a folder.
"""

from __future__ import annotations

import argparse
import io
import struct
import sys
import zlib
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from PIL import Image

from tools.photo_corpus import make_mask, make_photo

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
VARIANTS = 5            # random variants of each random mutation


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """[(type, payload)] of a well-formed PNG."""
    out, position = [], 8
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        out.append((kind, data[position + 8:position + 8 + length]))
        position += 12 + length
    return out


def chunk(kind: bytes, payload: bytes, crc: Optional[int] = None) -> bytes:
    crc = zlib.crc32(kind + payload) if crc is None else crc
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc & 0xFFFFFFFF)


def assemble(parts: Sequence[tuple[bytes, bytes]]) -> bytes:
    return PNG_SIGNATURE + b"".join(chunk(kind, payload) for kind, payload in parts)


def adam7_png(rgb: np.ndarray) -> bytes:
    """An interlaced (Adam7) 8-bit RGB PNG, written by hand (Pillow writes no interlaced PNG)."""
    height, width = rgb.shape[:2]
    rows = []
    for top, left, dy, dx in ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2),
                              (1, 0, 2, 1)):
        sub = rgb[top::dy, left::dx]
        if sub.size:
            rows += [b"\x00" + row.tobytes() for row in sub]          # filter type 0 (None) per row
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 1)
    return assemble([(b"IHDR", ihdr), (b"IDAT", zlib.compress(b"".join(rows), 6)), (b"IEND", b"")])


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _jpeg(image: Image.Image, **save) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90, **save)
    return out.getvalue()


def seeds(seed: int = 0) -> dict[str, bytes]:
    """The unmutated files: crops of pair 7 of the photo corpus and its mask."""
    photo = make_photo(7, seed)
    mask = make_mask(photo, 7, seed)
    small = Image.fromarray(photo).resize((120, 90), Image.Resampling.BICUBIC)
    small_mask = Image.fromarray(mask).resize((120, 90), Image.Resampling.NEAREST)
    palette_mask = Image.frombytes("P", small_mask.size, small_mask.tobytes())
    palette_mask.putpalette([v for i in range(256) for v in ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256)])
    return {"rgb.png": _png(small), "rgb-adam7.png": adam7_png(np.asarray(small)), "mask.png": _png(small_mask),
            "palette-mask.png": _png(palette_mask), "photo.jpg": _jpeg(Image.fromarray(photo)),
            "photo-progressive.jpg": _jpeg(small, progressive=True)}


def _idat_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every IDAT payload."""
    out, position = [], 8
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        if kind == b"IDAT":
            out.append((position + 8, position + 8 + length))
        position += 12 + length
    return out


def _with_stream(parts, stream: bytes) -> bytes:
    """The PNG with its image data replaced by ``stream`` (one IDAT before IEND)."""
    head = [p for p in parts if p[0] not in (b"IDAT", b"IEND")]
    return assemble(head + [(b"IDAT", stream), (b"IEND", b"")])


def png_mutations(data: bytes, rng: np.random.Generator) -> dict[str, bytes]:
    parts = chunks(data)
    ihdr = parts[0][1]
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
    start, end = _idat_spans(data)[0]
    stream = b"".join(p for k, p in parts if k == b"IDAT")
    out = {}
    for v in range(VARIANTS):
        flipped = bytearray(data)
        flipped[int(rng.integers(start + 2, end))] ^= 1 << int(rng.integers(8))
        out[f"idat_bitflip_crc_wrong_{v}"] = bytes(flipped)
        payload = bytearray(stream)
        payload[int(rng.integers(2, len(payload)))] ^= 1 << int(rng.integers(8))
        out[f"idat_bitflip_crc_valid_{v}"] = _with_stream(parts, bytes(payload))
        inverted = bytearray(data)
        inverted[int(rng.integers(8, len(data)))] ^= 0xFF
        out[f"random_byte_inverted_{v}"] = bytes(inverted)
        out[f"truncated_{v}"] = data[:int(rng.integers(40, len(data) - 1))]
    bad_crc = bytearray(data)
    bad_crc[_idat_spans(data)[-1][1]] ^= 0x01
    out["idat_crc_wrong"] = bytes(bad_crc)
    rest = b"".join(chunk(k, p) for k, p in parts[1:])
    out["text_crc_wrong"] = PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"tEXt", b"Comment\x00hi", crc=0x1234) + rest
    out["gama_crc_wrong"] = PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"gAMA", struct.pack(">I", 45455), crc=1) + rest
    out["ihdr_crc_wrong"] = PNG_SIGNATURE + chunk(b"IHDR", ihdr, crc=7) + rest
    out["no_iend"] = assemble([p for p in parts if p[0] != b"IEND"])
    out["garbage_after_iend"] = data + bytes(rng.integers(0, 256, 64, dtype=np.uint8))
    out["chunk_after_iend"] = data + chunk(b"tEXt", b"late\x00chunk")
    out["zlib_adler32_wrong"] = _with_stream(parts, stream[:-4] + bytes(b ^ 0x55 for b in stream[-4:]))
    out["zlib_stream_cut"] = _with_stream(parts, stream[:len(stream) * 2 // 3])
    out["zlib_extra_data"] = _with_stream(parts, stream + b"\x00\x01\x02\x03")
    for label, size in (("ihdr_height_plus_1", (width, height + 1)), ("ihdr_height_minus_1", (width, height - 1)),
                        ("ihdr_width_plus_1", (width + 1, height)), ("ihdr_60000x60000", (60000, 60000))):
        out[label] = assemble([(b"IHDR", struct.pack(">II", *size) + ihdr[8:])] + parts[1:])
    out["ihdr_bit_depth_3"] = assemble([(b"IHDR", ihdr[:8] + bytes([3]) + ihdr[9:])] + parts[1:])
    out["second_ihdr"] = assemble([parts[0]] + parts)
    out["unknown_critical_chunk"] = assemble([parts[0], (b"ABCD", b"xyz")] + parts[1:])
    out["unknown_ancillary_chunk"] = assemble([parts[0], (b"abCD", b"xyz")] + parts[1:])
    head = [p for p in parts if p[0] not in (b"IDAT", b"IEND")]
    out["empty_idat_between (valid)"] = assemble(head + [(b"IDAT", stream[:100]), (b"IDAT", b""),
                                                         (b"IDAT", stream[100:]), (b"IEND", b"")])
    if not interlace:
        raw = bytearray(zlib.decompress(stream))
        stride = (width * {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour] * depth + 7) // 8 + 1
        raw[stride * (height // 2)] = 7                              # filter type 7 does not exist
        out["bad_filter_byte"] = _with_stream(parts, zlib.compress(bytes(raw)))
        out["too_little_image_data"] = _with_stream(parts, zlib.compress(bytes(raw[:stride * (height - 3)])))
        out["too_much_image_data"] = _with_stream(parts, zlib.compress(zlib.decompress(stream) + b"\x00" * stride * 3))
    if colour == 3:
        plte = next(p for k, p in parts if k == b"PLTE")
        out["short_palette"] = assemble([(k, plte[:6] if k == b"PLTE" else p) for k, p in parts])
        out["no_palette"] = assemble([(k, p) for k, p in parts if k != b"PLTE"])
        out["transparency_longer_than_palette"] = assemble(
            [parts[0], (b"PLTE", plte), (b"tRNS", b"\x80" * 300)] + [p for p in parts[1:] if p[0] != b"PLTE"])
    return out


def jpeg_mutations(data: bytes, rng: np.random.Generator) -> dict[str, bytes]:
    sos = data.index(b"\xff\xda")
    scan = sos + 2 + struct.unpack(">H", data[sos + 2:sos + 4])[0]
    eoi = len(data) - 2
    out = {}
    for v in range(VARIANTS):
        flipped = bytearray(data)
        flipped[int(rng.integers(scan, eoi))] ^= 1 << int(rng.integers(8))
        out[f"scan_bitflip_{v}"] = bytes(flipped)
        noisy = bytearray(data)
        for _ in range(8):
            noisy[int(rng.integers(scan, eoi))] = int(rng.integers(256))
        out[f"scan_8_random_bytes_{v}"] = bytes(noisy)
        out[f"truncated_in_scan_{v}"] = data[:int(rng.integers(scan + 16, eoi))]
        inverted = bytearray(data)
        inverted[int(rng.integers(2, scan))] ^= 0xFF
        out[f"header_byte_inverted_{v}"] = bytes(inverted)
    out["no_eoi"] = data[:-2]
    out["garbage_after_eoi"] = data + bytes(rng.integers(0, 256, 64, dtype=np.uint8))
    out["truncated_in_headers"] = data[:scan - 5]
    sof = next(i for i in range(2, scan) if data[i] == 0xFF and data[i + 1] in (0xC0, 0xC1, 0xC2))
    height, width = struct.unpack(">HH", data[sof + 5:sof + 9])
    for label, size in (("sof_height_plus_16", (height + 16, width)), ("sof_width_minus_8", (height, width - 8)),
                        ("sof_60000x60000", (60000, 60000))):
        resized = bytearray(data)
        resized[sof + 5:sof + 9] = struct.pack(">HH", *size)
        out[label] = bytes(resized)
    lossless = bytearray(data)
    lossless[sof + 1] = 0xC3
    out["sof_lossless_marker"] = bytes(lossless)
    dqt = data.index(b"\xff\xdb")
    zeros = bytearray(data)
    zeros[dqt + 5:dqt + 21] = b"\x00" * 16
    out["dqt_zeros"] = bytes(zeros)
    dht = data.index(b"\xff\xc4")
    counts = bytearray(data)
    counts[dht + 5:dht + 21] = b"\xff" * 16
    out["dht_counts_broken"] = bytes(counts)
    out["extraneous_bytes_before_dqt"] = data[:dqt] + b"\x00\x00\x00\x00" + data[dqt:]
    return out


def mutated_files(seed: int = 0) -> dict[str, bytes]:
    """{file name: bytes}: every seed unmutated and all its mutations; the name keeps the seed's extension."""
    out = {}
    for name, data in seeds(seed).items():
        stem, ext = name.rsplit(".", 1)
        rng = np.random.default_rng([seed, sum(name.encode())])
        mutate = png_mutations if ext == "png" else jpeg_mutations
        out[name] = data
        for label, mutated in mutate(data, rng).items():
            out[f"{stem}.{label.split(' ')[0]}.{ext}"] = mutated
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mutations", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder to write the files to (created)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = mutated_files(args.seed)
    for name, data in files.items():
        (out / name).write_bytes(data)
    print(f"{len(files)} files, {sum(map(len, files.values())) // 1024} KB in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
