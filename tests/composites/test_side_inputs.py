"""Side inputs in the DirectRunner's in-process workers, read per bundle without Beam's state cache
(launcher/runners.py ``side_inputs_read_per_bundle``; docs/benchmarks.md, Fast start).

The cache weighed every side input a bundle loaded by walking the globals of every loaded module (objsize), in
every bundle of every run. Here a real pipeline on the launcher's runner, in the launcher's process,
reads singleton, list and dict side inputs in every one of its bundles: each bundle sees them whole, and nothing
is weighed.
"""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker import statecache
from apache_beam.testing.util import assert_that, equal_to

from beam_pipeline.launcher import runners

ELEMENTS = 300


@pytest.fixture
def weighed(monkeypatch):
    """How many values Beam's state cache weighs while the test runs (Beam's own function, counted)."""
    calls = []
    beams = statecache.get_deep_size

    def counting(*values):
        calls.append(len(values))
        return beams(*values)

    monkeypatch.setattr(statecache, "get_deep_size", counting)
    return calls


def test_the_engine_is_built_without_a_state_cache_for_its_in_process_workers():
    assert hasattr(worker_handlers, "STATE_CACHE_SIZE_MB"), "Beam renamed the constant runners.py sets"
    runners.runner(PipelineOptions([]))
    assert worker_handlers.STATE_CACHE_SIZE_MB == 0


@pytest.mark.parametrize("mode", ["in_memory", "multi_threading"])
def test_every_bundle_reads_its_side_inputs_whole(mode, weighed):
    options = PipelineOptions(["--direct_running_mode", mode, "--direct_num_workers", "2" if mode != "in_memory"
                               else "1"])
    with beam.Pipeline(runner=runners.runner(options), options=options) as pipeline:
        total = pipeline | "Total" >> beam.Create([7])
        names = pipeline | "Names" >> beam.Create(["a", "b", "c"])
        lookup = pipeline | "Lookup" >> beam.Create([("a", 1), ("b", 2)])
        seen = (pipeline
                | "Numbers" >> beam.Create(list(range(ELEMENTS)))
                | "Spread" >> beam.Reshuffle()                     # the main input over several bundles
                | "Read" >> beam.Map(lambda n, total, names, lookup: (n, total, tuple(sorted(names)),
                                                                     tuple(sorted(lookup.items()))),
                                     total=beam.pvalue.AsSingleton(total), names=beam.pvalue.AsList(names),
                                     lookup=beam.pvalue.AsDict(lookup)))
        assert_that(seen, equal_to([(n, 7, ("a", "b", "c"), (("a", 1), ("b", 2))) for n in range(ELEMENTS)]))
    assert weighed == []
