"""``python -m beam_pipeline``: parse options, run, print the summary."""

import atexit
import logging
import os
import sys

from beam_pipeline import console


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    console.configure(console.level_from_argv(argv))       # before Beam and TensorFlow are imported
    from beam_pipeline.launcher import memory
    memory.defer_collections()              # until the pipeline is built (launcher/memory.py)
    try:
        return _run_and_report(argv)
    finally:
        memory.resume_collections()


def _run_and_report(argv) -> int:
    from beam_pipeline.launcher.options import CorpusOptionsError, help_parser
    if any(arg in ("-h", "--help") for arg in argv):
        help_parser().print_help()
        return 0
    from beam_pipeline.launcher.memory import limit_malloc_growth
    limit_malloc_growth()
    from beam_pipeline.core.failures import RunFailed
    from beam_pipeline.core.locking import LockLost, OutputLocked
    from beam_pipeline.launcher.pipeline import run
    from beam_pipeline.stages.publish import RunRefused
    from beam_pipeline.launcher.summary import render_summary
    try:
        manifest = run(argv)
    except (CorpusOptionsError, RunRefused, OutputLocked) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (RunFailed, LockLost) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if "plan" in manifest:
        from beam_pipeline.launcher.plan import render_plan
        print(render_plan(manifest["plan"]))
        return 0
    output = manifest["options"]["output"]
    print(render_summary(manifest, output))
    return 0


def exit_now(code: int) -> None:
    """Flush and leave without running native libraries' static destructors.

    With Arrow's thread pools (and gRPC's) still alive at interpreter exit, a
    destructor can abort the process ("terminate called without an active
    exception") after all the work is done; every output is closed by now.

    Python's exit handlers (atexit) still run first: they stop what the runner started for this
    run, such as the Flink job server JVM, which Beam's FlinkRunner stops only at exit (skipping
    them left one job server process behind after every Flink run).
    """
    atexit._run_exitfuncs()  # noqa: SLF001 - the handlers os._exit would skip; errors are printed, not raised
    console.shutdown()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
