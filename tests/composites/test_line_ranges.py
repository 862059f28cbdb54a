"""A text file read in byte ranges (io/files.read_lines_in_range, line_ranges): how a re-run reads its parent's
pairs file, spread over the workers and never held whole (stages/leakage/rerun.py). Ranges that cut the file
anywhere, including in the middle of a line or right after a line end, give every line once, in order; the
expected lines are the file's bytes split at line ends. The object stores are tests/integration/test_objstore_io.py.
"""

import random

import pytest

from beam_pipeline.io import files


def _expected(data: bytes):
    lines = data.split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


@pytest.mark.parametrize("seed", range(3))
def test_ranges_cut_anywhere_give_each_line_once(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "pairs.jsonl"
    for trial in range(25):
        lines = [b"x" * rng.choice([0, 1, 2, 5, 30, 200]) + str(i).encode() for i in range(rng.randint(0, 40))]
        data = b"\n".join(lines) + (b"\n" if lines and rng.random() < 0.7 else b"")
        path.write_bytes(data)
        for range_bytes in (1, 2, 3, 7, 64, 1000):
            read = [line for start, end in files.line_ranges(len(data), range_bytes)
                    for line in files.read_lines_in_range(str(path), start, end, rng.choice([1, 3, 16, 1 << 16]))]
            assert read == _expected(data), (trial, range_bytes)


def test_ranges_cover_the_file_end_to_end_and_an_unknown_size_is_one_range(tmp_path):
    assert files.line_ranges(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert files.line_ranges(8, 4) == [(0, 4), (4, 8)]
    assert files.line_ranges(0, 4) == [(0, 1 << 62)]
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(b"a\nbb\nccc\n")
    assert list(files.read_lines_in_range(str(path), *files.line_ranges(0, 4)[0])) == [b"a", b"bb", b"ccc"]
