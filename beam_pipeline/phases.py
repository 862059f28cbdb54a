"""Named points of a run, where a test can hold it still: the kill matrix and the concurrent-run test.

With ``BEAM_PIPELINE_PAUSE_AT=<phase>`` and ``BEAM_PIPELINE_PAUSE_FILE=<path>`` in the environment
(the DirectRunner's SDK worker processes inherit it), the first process to reach ``<phase>`` creates
``<path>`` holding its pid, and every process that reaches it waits until ``<path>.go`` exists. A test
waits for ``<path>``, then kills the run (SIGKILL to its process group: launcher and SDK workers) or
creates ``<path>.go`` to let it go on. ``BEAM_PIPELINE_PAUSE_AFTER=<n>`` makes each process pass the
phase n - 1 times before it waits there (a kill once several verdict buckets are done). Without the
variables :func:`reached` returns at once; they are read once, when this module is imported.
"""

import os
import time

# In the SDK workers (where the DirectRunner runs them: validation, statistics, writing):
VALIDATE = "validate"                # a pair is about to be validated
VERDICTS_COMMITTED = "verdicts_committed"  # a verdict bucket is done: its verdicts are in the cache's parts
STATISTICS = "statistics"            # tf.Transform's analysis is fed its first batch
WRITE_SHARD = "write_shard"          # a shard file is open with its first record written
FINALIZE = "finalize"                # the job's last step: stats.json, digests, the pending manifest
# In the launcher, after the job:
PUBLISH = "publish"                  # the job finished; nothing of the commit done yet
PUBLISH_REPORT = "publish_report"    # report.html and the TFDV statistics written, manifest.json not yet
PUBLISH_MANIFEST = "publish_manifest"  # the lock checked; manifest.json is about to be written
COMMITTED = "committed"              # manifest.json written; old versions not yet collected
PHASES = (VALIDATE, VERDICTS_COMMITTED, STATISTICS, WRITE_SHARD, FINALIZE, PUBLISH, PUBLISH_REPORT, PUBLISH_MANIFEST, COMMITTED)

PAUSE_AT_VARIABLE = "BEAM_PIPELINE_PAUSE_AT"
PAUSE_FILE_VARIABLE = "BEAM_PIPELINE_PAUSE_FILE"
PAUSE_AFTER_VARIABLE = "BEAM_PIPELINE_PAUSE_AFTER"
_PAUSE_AT = os.environ.get(PAUSE_AT_VARIABLE)
_PAUSE_FILE = os.environ.get(PAUSE_FILE_VARIABLE)
_PAUSE_AFTER = int(os.environ.get(PAUSE_AFTER_VARIABLE) or 1)
_passed = 0
_POLL_SECONDS = 0.05


def reached(phase: str) -> None:
    """Called where a run passes ``phase``; waits there only when a test asked for it."""
    global _passed
    if _PAUSE_AT != phase or not _PAUSE_FILE:
        return
    _passed += 1
    if _passed < _PAUSE_AFTER:
        return
    go = _PAUSE_FILE + ".go"
    if os.path.exists(go):
        return
    try:
        fd = os.open(_PAUSE_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, f"{os.getpid()} {phase}\n".encode())
        os.close(fd)
    except FileExistsError:
        pass                         # another process got here first; wait with it
    while not os.path.exists(go):
        time.sleep(_POLL_SECONDS)
