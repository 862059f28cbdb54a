"""What the launcher changes in how Beam answers itself, and that the answers stay Beam's.

``LaunchOptions`` makes each view of the command line's options once (launcher/options.py);
``cache_signatures`` makes Beam's ``get_signature`` remember its answer per function, and ``AnyOutput`` DoFns say
the output type Beam would infer (stages/signatures.py). Both
are checked against Beam's own behaviour on real Beam objects: the same values through every view, copies and
pickles; the same signatures and the same DoFn specs (state and timer parameters found, bad ones refused) as
Beam's unremembered function. ``prompt_state_sampler`` shortens the state sampler's period (stages/sampling.py): a
real sampler still charges the running state its time.
"""

import copy
import functools
import gc
import pickle
import time
import weakref

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions, TypeOptions
from apache_beam.runners.worker import statesampler
from apache_beam.transforms import core, ptransform, userstate, util
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam import typehints
from apache_beam.typehints import decorators
from apache_beam.utils.counters import CounterFactory

from beam_pipeline.launcher.options import LaunchOptions
from beam_pipeline.stages import sampling, signatures
from beam_pipeline.stages.publish import FinalizeFn
from beam_pipeline.stages.shuffle import _WriteBucketsFn
from beam_pipeline.stages.validate import ValidateBucketFn

MODULES = (decorators, core, ptransform, util)     # where Beam's get_signature is named


# -------------------------------------------------------------------- options
def test_a_view_is_made_once_and_reads_and_writes_the_shared_values():
    options = LaunchOptions(["--runner", "DirectRunner", "--direct_num_workers", "3", "--no_pipeline_type_check"])
    assert options.view_as(TypeOptions) is options.view_as(TypeOptions)
    assert options.view_as(TypeOptions).pipeline_type_check is False
    assert options.view_as(DirectOptions).direct_num_workers == 3
    options.view_as(DirectOptions).direct_running_mode = "multi_threading"      # as apply_runner_defaults does
    assert options.view_as(DirectOptions).direct_running_mode == "multi_threading"
    assert options.get_all_options()["direct_running_mode"] == "multi_threading"
    assert options.view_as(StandardOptions).runner == "DirectRunner"


def test_copies_and_pickles_keep_the_values_and_make_their_own_views():
    options = LaunchOptions(["--direct_num_workers", "2"])
    options.view_as(DirectOptions).direct_running_mode = "in_memory"
    for other in (copy.deepcopy(options), pickle.loads(pickle.dumps(options))):
        view = other.view_as(DirectOptions)
        assert view is not options.view_as(DirectOptions)
        assert (view.direct_running_mode, view.direct_num_workers) == ("in_memory", 2)
        view.direct_num_workers = 5                          # the copy's values are its own
        assert options.view_as(DirectOptions).direct_num_workers == 2
        assert other.view_as(DirectOptions) is view


def test_a_pipeline_given_launch_options_runs_with_their_values(tmp_path):
    options = LaunchOptions(["--runner", "DirectRunner", "--direct_running_mode", "in_memory"])
    with beam.Pipeline(options=options) as pipeline:
        assert pipeline.options.view_as(DirectOptions).direct_running_mode == "in_memory"
        _ = (pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * 2)
             | beam.io.WriteToText(str(tmp_path / "out"), shard_name_template=""))
    assert sorted((tmp_path / "out").read_text().split()) == ["2", "4", "6"]


# -------------------------------------------------------------------- signatures
class _Stateful(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", VarIntCoder())
    TIMER = userstate.TimerSpec("timer", TimeDomain.WATERMARK)

    def process(self, element, count=beam.DoFn.StateParam(COUNT), timer=beam.DoFn.TimerParam(TIMER)):
        yield element

    @userstate.on_timer(TIMER)
    def on_timer(self, count=beam.DoFn.StateParam(COUNT)):
        yield 0


class _TwiceTheSameState(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", VarIntCoder())

    def process(self, element, first=beam.DoFn.StateParam(COUNT), second=beam.DoFn.StateParam(COUNT)):
        yield element


def _plain(a, b=2, *rest, key=None, **more):
    return a


class _Callable:
    def __call__(self, x, y=1):
        return x


def _callables():
    dofn = _Stateful()
    return [_plain, lambda x, y=3: x, dofn.process, dofn.on_timer, _Stateful.process, beam.DoFn().process,
            dofn.default_label, functools.partial(_plain, 1), _Callable(), str.strip, len, dict.get]


@pytest.fixture
def remembering():
    """Beam's get_signature remembering afresh; yields Beam's own function, to compare with."""
    saved = {module: module.get_signature for module in MODULES}
    beams = getattr(decorators.get_signature, "beams", decorators.get_signature)
    for module in MODULES:
        module.get_signature = beams
    signatures.cache_signatures()
    assert all(module.get_signature is not beams for module in MODULES)
    yield beams
    for module, function in saved.items():
        module.get_signature = function


def test_remembered_signatures_are_beams_own(remembering):
    for func in _callables():
        expected = remembering(func)
        assert core.get_signature(func) == expected == decorators.get_signature(func), func
        assert core.get_signature(func) == expected, func                  # asked again: the remembered answer


def test_a_methods_signature_is_its_functions_whatever_the_instance(remembering):
    first, second = _Stateful(), _Stateful()
    assert list(core.get_signature(first.process).parameters) == ["element", "count", "timer"]
    assert core.get_signature(second.process) is core.get_signature(first.process)
    assert list(core.get_signature(_Stateful.process).parameters) == ["self", "element", "count", "timer"]


def _specs(dofn):
    states, timers = userstate.get_dofn_specs(dofn)
    return sorted(spec.name for spec in states), sorted(spec.name for spec in timers)


def test_dofn_specs_and_refusals_are_beams(remembering):
    remembered = _specs(_Stateful())
    assert remembered == (["count"], ["ts-timer"])
    assert userstate.is_stateful_dofn(_Stateful()) and not userstate.is_stateful_dofn(beam.DoFn())
    with pytest.raises(ValueError, match="duplicate process method parameters"):
        userstate.validate_stateful_dofn(_TwiceTheSameState())
    for module in MODULES:                          # Beam's own answers, for the same DoFns
        module.get_signature = remembering
    assert _specs(_Stateful()) == remembered


def test_functions_are_held_weakly(remembering):
    def made_for_a_bundle(x):
        return x
    core.get_signature(made_for_a_bundle)
    gone = weakref.ref(made_for_a_bundle)
    del made_for_a_bundle
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("dofn_class", [ValidateBucketFn, _WriteBucketsFn, FinalizeFn], ids=lambda cls: cls.__name__)
def test_dofns_saying_any_output_are_what_beam_infers(dofn_class):
    dofn = object.__new__(dofn_class)                # inference reads the bytecode, not the instance
    for input_type in (typehints.Any, typehints.Tuple[int, typehints.Any]):
        assert beam.DoFn.infer_output_type(dofn, input_type) == typehints.Any
        assert dofn.infer_output_type(input_type) == typehints.Any


# -------------------------------------------------------------------- state sampler
@pytest.fixture
def beams_sampler_default():
    """The state sampler's default period as Beam ships it, put back after the test."""
    init = statesampler.StateSampler.__init__
    saved = init.__defaults__
    init.__defaults__ = (sampling.BEAM_DEFAULT_MS,)
    yield init
    init.__defaults__ = saved


def test_a_prompt_state_sampler_still_charges_the_running_state(beams_sampler_default):
    assert statesampler.StateSampler("before", CounterFactory()).sampling_period_ms == 200     # Beam's own
    sampling.prompt_state_sampler()
    sampling.prompt_state_sampler()                                                            # once is enough
    sampler = statesampler.StateSampler("stage", CounterFactory())
    assert sampler.sampling_period_ms == sampling.SAMPLING_PERIOD_MS == 10
    state = sampler.scoped_state("step", "process")
    sampler.start()
    with state:
        time.sleep(0.3)
    sampler.stop()
    assert 0.25 <= state.sampled_seconds() <= 0.5       # what it measures, in 10 ms steps instead of 200 ms


def test_a_sampler_default_beam_changed_is_left_alone(beams_sampler_default):
    beams_sampler_default.__defaults__ = (50,)
    sampling.prompt_state_sampler()
    assert statesampler.StateSampler("stage", CounterFactory()).sampling_period_ms == 50



def test_dofn_specs_are_answered_once_per_dofn_and_refusals_every_time(remembering):
    assert hasattr(userstate.get_dofn_specs, "beams")
    beams_specs = userstate.get_dofn_specs.beams
    asked = []

    def counting(dofn):
        asked.append(dofn)
        return beams_specs(dofn)

    per_dofn = signatures._specs_per_dofn(counting)
    first, second = _Stateful(), _Stateful()
    answers = [per_dofn(first), per_dofn(first), per_dofn(second)]
    assert [sorted(spec.name for spec in states) for states, _ in answers] == [["count"]] * 3
    assert [sorted(spec.name for spec in timers) for _, timers in answers] == [["ts-timer"]] * 3
    assert asked == [first, second]                 # once per instance
    answers[0][0].clear()                           # what a caller does with its answer stays its own
    assert len(per_dofn(first)[0]) == 1
    for _ in range(2):                              # a refusal is Beam's, at every question
        with pytest.raises(ValueError, match="duplicate process method parameters"):
            per_dofn(_TwiceTheSameState())
    gone = weakref.ref(first)
    del first, answers, asked[:]
    gc.collect()
    assert gone() is None                           # held weakly
