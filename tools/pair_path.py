"""Trace one pair's path through the product code, from discovery to its shard record.

    python -m tools.pair_path LISTING --num_classes N [--task segmentation] [--row 0]

Runs the per-pair module's four steps on one pair of a listing file, as the
composites and --plan call them (``pairs.discover`` -> ``pairs.select`` ->
``pairs.check`` -> ``pairs.record``, default options: no --filter or globs),
under ``sys.setprofile``, and prints:

* the path: the product files that beam_pipeline/stages/pairs.py hands the pair's
  work to (every call made directly from pairs.py into another product file),
  in order, with consecutive calls into one file counted as one visit. A file
  that appears again after another file is a revisit: the pair went back.
* the reads: calls from pairs.py into the product's file-access layer
  (beam_pipeline/io/streams.py: what Beam's FileSystems does not do for reads,
  such as one S3 client per thread and telling a missing object from a refused
  one). It plays the part FileSystems played before object stores were
  supported, and is listed apart from the path: each file of a pair is read
  at check and read again at record (the shuffle moves metadata, not pixels),
  so it is entered twice by design.
* the footprint: every product file entered at any depth (helpers included),
  with the number of calls into it.

Product files are those of beam_pipeline/ and trainer/.
"""

import argparse
import collections
import dataclasses
import os
import sys
from typing import Dict, List

import beam_pipeline
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.records import Outcome
from beam_pipeline.core.selection import parse_split
from beam_pipeline.stages import pairs
from beam_pipeline.stages.specs import LISTING, CheckSpec, DiscoverSpec, SelectSpec

PRODUCT = os.path.dirname(os.path.dirname(os.path.abspath(beam_pipeline.__file__)))
PACKAGES = ("beam_pipeline", "trainer")
SPINE = os.path.abspath(pairs.__file__)
IO_LAYER = ("beam_pipeline/io/streams.py",)


@dataclasses.dataclass
class PairPath:
    path: List[str]                    # files pairs.py hands the work to, in order (consecutive calls merged)
    footprint: Dict[str, int]          # every product file entered, with its number of calls
    written: bool                      # the pair ended as a record (not an Outcome or Rejection)
    reads: List[str] = dataclasses.field(default_factory=list)   # the step of each file opened via IO_LAYER

    @property
    def files(self) -> List[str]:
        """The distinct files of the path, the per-pair module first."""
        return [_relative(SPINE)] + sorted(set(self.path), key=self.path.index)

    @property
    def revisits(self) -> List[str]:
        return sorted({name for name, count in collections.Counter(self.path).items() if count > 1})


def _relative(filename: str) -> str:
    return os.path.relpath(filename, PRODUCT)


def _is_product(filename: str) -> bool:
    return _relative(filename).split(os.sep, 1)[0] in PACKAGES if filename.startswith(PRODUCT) else False


def trace_pair(listing: str, num_classes: int, task: str = "segmentation", row: int = 0) -> PairPath:
    """Discover, select, check and encode the ``row``-th input of ``listing`` under a profiler."""
    discover_spec = DiscoverSpec(listing, LISTING, task)
    select_spec = SelectSpec(parse_split("train=0.8,val=0.1,test=0.1"))
    check_spec = CheckSpec(task, Limits(num_classes=num_classes))
    path: List[str] = []
    reads: List[str] = []
    footprint: Dict[str, int] = collections.Counter()
    step = ["discover"]

    def profile(frame, event, _):
        if event != "call" or not _is_product(frame.f_code.co_filename):
            return
        name = _relative(frame.f_code.co_filename)
        footprint[name] += 1
        caller = frame.f_back
        if caller is not None and os.path.abspath(caller.f_code.co_filename) == SPINE and name != _relative(SPINE):
            if name in IO_LAYER:
                if frame.f_code.co_name == "open_for_read":
                    reads.append(step[0])
            elif not path or path[-1] != name:
                path.append(name)

    sys.setprofile(profile)
    try:
        item = None
        for index, found in enumerate(pairs.discover(discover_spec)):
            if index == row:
                item = found
                break
        written = False
        if item is not None and not isinstance(item, Outcome):
            step[0] = "select"
            selected = pairs.select(item, select_spec)
            if not isinstance(selected, Outcome):
                step[0] = "check"
                checked, _ = pairs.check(selected, check_spec)
                if not hasattr(checked, "reason"):
                    step[0] = "record"
                    written = not hasattr(pairs.record(checked, check_spec), "reason")
    finally:
        sys.setprofile(None)
    return PairPath(path, dict(footprint), written, reads)


def render(result: PairPath) -> str:
    lines = [f"path of one pair ({'written' if result.written else 'NOT written'}): "
             + " -> ".join([_relative(SPINE)] + result.path),
             f"  {len(result.files)} product files on the path (the per-pair module included), "
             f"revisited: {', '.join(result.revisits) or 'none'}",
             f"files opened through {', '.join(IO_LAYER)}: {len(result.reads)} "
             f"({', '.join(f'{n} at {s}' for s, n in collections.Counter(result.reads).items()) or 'none'})",
             f"footprint: {len(result.footprint)} product files entered at any depth (calls):"]
    lines += [f"  {name:<40} {count:>6}" for name, count in sorted(result.footprint.items())]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pair_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("listing", help="a listing file (.csv, .jsonl, .parquet) with image and mask columns")
    parser.add_argument("--num_classes", type=int, required=True)
    parser.add_argument("--task", default="segmentation", choices=("segmentation", "classification"))
    parser.add_argument("--row", type=int, default=0, help="which input of the listing to trace")
    args = parser.parse_args(argv)
    print(render(trace_pair(args.listing, args.num_classes, args.task, args.row)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
