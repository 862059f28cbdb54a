"""A text file read in byte ranges (io/files.read_lines_in_range, line_ranges): how a re-run reads its parent's
pairs file, spread over the workers and never held whole (stages/leakage/rerun.py). Ranges that cut the file
anywhere, including in the middle of a line or right after a line end, give every line once, in order; the
expected lines are the file's bytes split at line ends. The object stores are tests/integration/test_objstore_io.py.
Sorted runs merged as they are read (io/files.join_sorted_parts) give what sorting their lines together gives.
"""

import hashlib
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


@pytest.mark.parametrize("seed", range(3))
def test_runs_of_a_part_merged_as_read_give_the_parts_lines_sorted_together(tmp_path, seed):
    """How the pairs file is joined (stages/leakage/files.py): each part's lines were cut into runs, each run
    sorted and written alone; the joined file must be every part's lines sorted as Python sorts the strings (a
    line that begins another, characters past ASCII), parts in order, whatever the runs and the write size."""
    rng = random.Random(seed)
    words = ["a", "ab", "ab!", "b", "é", "éa", "z", "{\"a\":1}", "{\"a\":\"x\"}", "中", "ß", ""]
    parts, expected = [], b""
    for part in range(rng.randint(0, 4)):
        lines = ["".join(rng.choice(words) for _ in range(rng.randint(1, 4))) + f"-{part}-{i}"
                 for i in range(rng.randint(0, 60))]
        runs = rng.choice([1, 2, 3, 7])
        paths = []
        for run in range(runs):
            path = tmp_path / f"part-{part}-{run}.jsonl"
            path.write_bytes("".join(f"{line}\n" for line in sorted(lines[run::runs])).encode("utf-8"))
            paths.append(str(path))
        parts.append(paths)
        expected += "".join(f"{line}\n" for line in sorted(lines)).encode("utf-8")
    target = tmp_path / "joined.jsonl"
    entry = files.join_sorted_parts(parts, str(target), write_bytes_at_once=rng.choice([1, 10, 1 << 20]))
    assert target.read_bytes() == expected
    assert entry == {"bytes": len(expected), "sha256": hashlib.sha256(expected).hexdigest()}
