"""Keep glibc's allocator from growing the heap with the number of pairs, here and in the SDK workers.

Validation decodes every image into buffers of a few hundred KB to a few MB,
and the runner moves bundles through gRPC from several threads. With glibc's
defaults each thread may get its own malloc arena (up to 8 per core), and
freed buffers scattered over many arenas are not given back, so the resident
size creeps up with the number of pairs processed. Two arenas per process stop
that.

Measured by bench/pipeline_throughput.py (base pipeline, 2,000 and 8,000 pairs,
same session): with ``MALLOC_ARENA_MAX=2`` the runner process peaks at 242 and
274 MB (1.13x) and the process tree at 706 and 811 MB (1.15x), where glibc's
defaults gave 253 -> 322 MB (1.27x) for the runner; the marginal ratio stayed
0.90 (2.05 ms per pair). A fixed ``MALLOC_MMAP_THRESHOLD_=131072`` as well gave
1.12x but doubled the time per pair (4.0 ms): every decoded image then costs
fresh pages from the kernel. So only the arena count is set.
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
