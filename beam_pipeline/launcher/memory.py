"""Keep glibc's allocator from growing the heap with the number of pairs, here and in the SDK workers.

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

import ctypes
import ctypes.util
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
