"""Beam's state sampler, told to stop within 10 ms of a bundle's end instead of within 200 ms.

Every bundle Beam's SDK harness runs starts a state sampler: a thread that wakes to charge the time since its last
wake to the step that is running (Beam's msec counters, and the "lull" lines of a step that runs for minutes). Its
sleep starts at 2 ms and grows by a fifth at each wake up to ``sampling_period_ms``, 200 ms, in about a second.
When the bundle is done, the harness stops the sampler and joins its thread, which ends only when its sleep does:
each bundle waits for up to one period before its results reach the runner. A run of about ninety stages, as
README's first run is, waits that much for every stage, and a stage of a second or more up to 200 ms (Beam's
own pull request 5466 added the ramp for the same wait, for pipelines with many small stages).

:func:`prompt_state_sampler` lowers the period's default to ``SAMPLING_PERIOD_MS``: the sampler then wakes 100
times a second while a bundle runs (about 0.4 % of a core, outside the GIL; at 2 ms it took 1.5 %) and a stopped one
is joined within 10 ms (docs/benchmarks.md, Fast start). What it measures stays the same, in finer steps: no
output of the pipeline depends on it.

Installed where ``signatures.cache_signatures`` is: in the launcher (the stages it runs in-process) and in SDK worker
processes (``worker.prepare_sdk_worker``). If this Beam's sampler takes no such default, nothing is changed.
"""

SAMPLING_PERIOD_MS = 10
BEAM_DEFAULT_MS = 200


def prompt_state_sampler() -> None:
    """Make the state sampler of every bundle processor built from now on in this process sleep at most
    ``SAMPLING_PERIOD_MS`` (once per process; a sampler already running keeps its period)."""
    from apache_beam.runners.worker import statesampler
    init = getattr(getattr(statesampler, "StateSampler", None), "__init__", None)
    if getattr(init, "__defaults__", None) == (BEAM_DEFAULT_MS,):
        init.__defaults__ = (SAMPLING_PERIOD_MS,)
