"""Keep glibc's allocator from growing the heap with the number of pairs, here and in the SDK workers; and keep
Python's cyclic garbage collector from scanning, again and again, the objects a run makes once and keeps.

Validation decodes every image into buffers of a few hundred KB to a few MB,
and the runner moves bundles through gRPC from several threads. With glibc's
defaults each thread may get its own malloc arena (up to 8 per core), and
freed buffers scattered over many arenas are not given back, so the resident
size creeps up with the number of pairs processed. Two arenas per process stop
that.

Only the arena count is set: a fixed mmap threshold as well flattened memory
no further and doubled the time per pair, since every decoded image then costs
fresh pages from the kernel. The measurements, and the command that made them,
are in docs/benchmarks.md ("Prism and memory").
"""

import contextlib
import ctypes
import ctypes.util
import gc
import os

# glibc's environment variables, read by each process when it starts (the SDK workers),
# and the mallopt() parameters that set the same in this already running process.
SETTINGS = {"MALLOC_ARENA_MAX": ("2", -8)}


def limit_malloc_growth() -> None:
    """Apply SETTINGS here (mallopt) and to every child process (environment), unless already set."""
    for name, (value, _) in SETTINGS.items():
        os.environ.setdefault(name, value)
    library = ctypes.util.find_library("c")
    if library is None:
        return
    try:
        mallopt = ctypes.CDLL(library).mallopt
    except (OSError, AttributeError):      # not glibc (musl, macOS): nothing to tune
        return
    for name, (_, parameter) in SETTINGS.items():
        if os.environ[name].isdigit():      # a value the user set that glibc would ignore, we ignore too
            mallopt(parameter, int(os.environ[name]))


# --------------------------------------------------------------------------
# The cyclic garbage collector
# --------------------------------------------------------------------------
# Importing Beam, TensorFlow and tf.Transform and building the pipeline make about 450,000 objects that live
# until the run ends. Python's collector scans every tracked object at each full (generation 2) collection, and
# the heap's growth during the imports triggers one every few hundred thousand allocations: in README's first run,
# 8 full collections took 1.5 s of a 13 s run, 1.1 s of it during the imports and the construction, and collected
# next to nothing (docs/benchmarks.md, "The collector off while the run starts"). The command line therefore turns
# the collector off until the pipeline is built, then freezes what exists (gc.freeze: those objects are never
# scanned again) and turns it back on for the run, which makes and drops its garbage as before.

def defer_collections() -> None:
    """No cyclic collection until :func:`frozen_for_the_run` (or :func:`resume_collections`): the command line
    calls it before its imports."""
    gc.disable()


def resume_collections() -> None:
    """The collector on again (the command line's way out, whatever happened)."""
    gc.enable()


@contextlib.contextmanager
def frozen_for_the_run():
    """What exists now (modules, the built pipeline) left out of every later collection, and the collector on,
    for the run inside; unfrozen after it, so that a process running several jobs (the tests) collects a
    finished job's objects again."""
    gc.freeze()
    gc.enable()
    try:
        yield
    finally:
        gc.unfreeze()
