"""``python -m beam_pipeline``: parse options, run, print the summary."""

import atexit
import logging
import os
import sys
import warnings

# TensorFlow's C++ start-up notices (CPU features, missing CUDA) are not about this run.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Google Cloud client libraries (pulled in by apache-beam[gcp]) warn about their own
# future requirements at import time; that says nothing about this run.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\..*")

from beam_pipeline.memory import limit_malloc_growth  # noqa: E402
from beam_pipeline.options import CorpusOptionsError, help_parser  # noqa: E402


_RUNNER_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.worker.sdk_worker",
                   "apache_beam.runners.worker.bundle_processor",
                   "apache_beam.runners.portability.fn_api_runner.fn_runner",
                   "apache_beam.runners.portability.local_job_service")   # SDK worker processes' logs, forwarded


class _OneReportPerError(logging.Filter):
    """Drop the runner's own error logs: the same error is raised from run() and reported once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("apache_beam") and record.levelno >= logging.ERROR)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        help_parser().print_help()
        return 0
    limit_malloc_growth()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("beam_pipeline").setLevel(logging.INFO)
    for name in _RUNNER_LOGGERS:
        logging.getLogger(name).addFilter(_OneReportPerError())
    from beam_pipeline.core.failures import RunFailed
    from beam_pipeline.core.locking import LockLost, OutputLocked
    from beam_pipeline.pipeline import run
    from beam_pipeline.publish import RunRefused
    from beam_pipeline.summary import render_summary
    try:
        manifest = run(argv)
    except (CorpusOptionsError, RunRefused, OutputLocked) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (RunFailed, LockLost) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if "plan" in manifest:
        from beam_pipeline.plan import render_plan
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
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
