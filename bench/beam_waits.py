"""What two of the launcher's changes to Beam save in README's first runs, measured inside the runs themselves.

    python bench/beam_waits.py [--repeats 5] [--workdir build/bench] [--json PATH]

Both changes act where a run on the launcher's own process (README's runs, and most of the test suite's) spends time
that is not work (issue 44, docs/benchmarks.md "Fast start"):

* ``stages/sampling.py``: the state sampler's period, 10 ms instead of Beam's 200 ms. Every bundle's end joins the
  sampler's thread, which ends only when its sleep does.
* ``stages/signatures.py``: ``userstate.get_dofn_specs`` answered once per DoFn instance, where Beam asks it about
  eight times of each DoFn.

Each run is a fresh ``python`` process that runs README's segmentation or classification command into a fresh
output, either as this checkout ships (``this``) or with both changes left out (``beam``: Beam's sampler period and
its ``get_dofn_specs`` asked every time); the rest is the same code. Inside the run it times every join of a state
sampler (the bundles' waits) and every call of Beam's own ``get_dofn_specs``, with ``time.perf_counter``: the
seconds waited and spent there do not depend on the machine's speed the way a whole run's do. The two kinds
alternate, in reversed order every other repetition, and the report gives median (min..max) over the repetitions
of each figure, the run's wall time with them, and the datasets compared (``tools/compare_outputs.py``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from common import log, positive, readme_sample  # noqa: E402
from harness import fmt_spread, interleaved, new_parser, spread_figure, write_json  # noqa: E402
from readme_runs import RUNS  # noqa: E402  README's two runs

KINDS = ("beam", "this")


def child(kind: str, output: str, args: Sequence[str]) -> None:
    """One run in this process; prints its figures as one JSON line."""
    import logging
    logging.disable(logging.CRITICAL)
    from apache_beam.runners.worker import statesampler
    from apache_beam.transforms import userstate

    waits, specs = [], []
    stop, beams_specs = statesampler.StateSampler.stop_if_still_running, userstate.get_dofn_specs

    def timed_stop(self):
        started = time.perf_counter()
        stop(self)
        waits.append(time.perf_counter() - started)

    def timed_specs(dofn):
        started = time.perf_counter()
        try:
            return beams_specs(dofn)
        finally:
            specs.append(time.perf_counter() - started)

    statesampler.StateSampler.stop_if_still_running = timed_stop
    userstate.get_dofn_specs = timed_specs          # Beam's own, timed; the launcher may wrap it in its memo
    from beam_pipeline.launcher import pipeline
    from beam_pipeline.stages import signatures
    if kind == "beam":
        pipeline.prompt_state_sampler = lambda: None
        signatures._specs_per_dofn = lambda get_dofn_specs: get_dofn_specs
    started = time.perf_counter()
    pipeline.run([*args, "--output", output, "--overwrite"])
    print(json.dumps({"wall": time.perf_counter() - started, "bundles": len(waits), "waited": sum(waits),
                      "specs_calls": len(specs), "specs_seconds": sum(specs)}))


def one(kind: str, run: str, sample: Path, output: Path) -> dict:
    shutil.rmtree(output, ignore_errors=True)
    done = subprocess.run([sys.executable, __file__, "--child", kind, str(output), *RUNS[run](sample)], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the {kind} {run} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2], argv[3:])
        return 0
    parser = new_parser("python bench/beam_waits.py", __doc__)
    parser.add_argument("--repeats", type=positive, default=5)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    sample = readme_sample(args.workdir / "sample")
    results = {run: {kind: [] for kind in KINDS} for run in RUNS}
    for repeat in range(args.repeats):
        for run in RUNS:
            for kind in interleaved(KINDS, repeat):
                figures = one(kind, run, sample, args.workdir / "beam_waits" / kind)
                results[run][kind].append(figures)
                log(f"{kind:5s} {run:15s} {figures['wall']:5.1f} s  {figures['bundles']} bundles waited "
                    f"{figures['waited']:.3f} s  Beam's get_dofn_specs {figures['specs_calls']} calls "
                    f"{figures['specs_seconds']:.3f} s")
            compared = subprocess.run([sys.executable, "-m", "tools.compare_outputs",
                                       str(args.workdir / "beam_waits" / "beam"),
                                       str(args.workdir / "beam_waits" / "this")],
                                      cwd=ROOT, capture_output=True, text=True, check=False)
            results[run].setdefault("compared", []).append(compared.stdout.strip().splitlines()[-1:])
    print(f"README's first runs, {args.repeats} interleaved repetitions; beam = both changes left out:")
    record = {}
    for run in RUNS:
        record[run] = {}
        for field, label in (("waited", "bundles' waits for the sampler, s"), ("specs_calls", "calls of Beam's "
                             "get_dofn_specs"), ("specs_seconds", "seconds in Beam's get_dofn_specs"),
                             ("wall", "the run, wall s")):
            figures = {kind: spread_figure([r[field] for r in results[run][kind]]) for kind in KINDS}
            ratio = spread_figure([t[field] / b[field] if b[field] else None
                                   for t, b in zip(results[run]["this"], results[run]["beam"])])
            saved = spread_figure([b[field] - t[field] for t, b in zip(results[run]["this"], results[run]["beam"])])
            record[run][field] = {**figures, "this_over_beam": ratio, "saved": saved}
            spec = ".0f" if field == "specs_calls" else (".2f" if field == "wall" else ".3f")
            print(f"  {run:15s} {label:37s} beam {fmt_spread(figures['beam'], spec):>22}  this "
                  f"{fmt_spread(figures['this'], spec):>22}  saved {fmt_spread(saved, spec)}")
        same = sorted({" ".join(c) for c in results[run]["compared"]})
        print(f"  {run:15s} outputs: {'; '.join(same)}")
    write_json(args.json, {"repeats": args.repeats, "runs": record})
    return 0


if __name__ == "__main__":
    sys.exit(main())
