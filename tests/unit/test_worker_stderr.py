"""What an SDK worker's stderr keeps (beam_pipeline/stages/worker.py): everything but the harness's printed
copy of a failed bundle's traceback, which the launcher reports once; at debug level, everything.

The harness's print is reproduced by a function named as Beam's (``_execute``) compiled under the path of
Beam's sdk_worker.py, so the stream sees the same caller the real harness gives it. The real harness's
case, a full disk, is tests/end_to_end/test_reliability.py::test_a_full_disk_ends_the_run_with_the_file_...
"""

import io
import logging
import sys
import traceback

import pytest

from beam_pipeline.stages import worker

HARNESS_SOURCE = '''
def _execute(stream):
    try:
        raise OSError(28, "No space left on device")
    except OSError:
        print(traceback.format_exc(), file=stream)

def _other(stream):
    print("Traceback (most recent call last):\\n  a user's own traceback", file=stream)
'''


def _harness_functions(path_of_file: str):
    namespace = {"traceback": traceback}
    exec(compile(HARNESS_SOURCE, path_of_file, "exec"), namespace)   # noqa: S102 - a fixed test source
    return namespace["_execute"], namespace["_other"]


@pytest.fixture
def root_level():
    root = logging.getLogger()
    before = root.level
    yield root.setLevel
    root.setLevel(before)


def test_the_harness_copy_of_a_failed_bundle_is_left_out(root_level):
    root_level(logging.INFO)
    execute, other = _harness_functions(f"/site-packages/{worker.HARNESS_FILE}")
    kept = io.StringIO()
    stream = worker.HarnessTracebacksLeftOut(kept)
    stream.write("a warning\n")
    execute(stream)
    other(stream)                 # same file, another function: kept
    print("after", file=stream)
    assert kept.getvalue() == ("a warning\nTraceback (most recent call last):\n  a user's own traceback\n"
                               "after\n")


def test_a_traceback_printed_elsewhere_or_at_debug_level_is_kept(root_level):
    root_level(logging.INFO)
    execute, _ = _harness_functions("/site-packages/some_library/sdk_worker.py")
    kept = io.StringIO()
    execute(worker.HarnessTracebacksLeftOut(kept))
    assert kept.getvalue().startswith("Traceback (most recent call last):") and "No space left" in kept.getvalue()

    root_level(logging.DEBUG)
    execute, _ = _harness_functions(f"/site-packages/{worker.HARNESS_FILE}")
    kept = io.StringIO()
    execute(worker.HarnessTracebacksLeftOut(kept))
    assert "OSError: [Errno 28] No space left on device" in kept.getvalue()


def test_the_stream_passes_its_other_attributes_through():
    stream = worker.HarnessTracebacksLeftOut(sys.__stderr__)
    assert stream.fileno() == sys.__stderr__.fileno() and stream.encoding == sys.__stderr__.encoding
