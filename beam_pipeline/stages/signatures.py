"""Beam's function signatures, read once per function instead of once per question.

Beam checks a DoFn's methods for state and timer parameters each time it builds a bundle's processor, and again for
each transform at construction and translation: ``userstate.get_dofn_specs`` walks every method of the DoFn (its
own and ``beam.DoFn``'s thirty) and asks ``inspect.signature`` of each, through ``typehints.decorators
.get_signature``. A small run asks that about 76,000 times, about a tenth of README's first run (docs/benchmarks.md,
Fast start).

:func:`cache_signatures` makes Beam's ``get_signature`` remember its answer per function. The answer depends on
the function alone: a bound method's signature is its function's without the first parameter, whatever the
instance, so methods are remembered by their function, and every DoFn of a class shares one entry. Functions are
held weakly, so a worker unpickling new DoFns for every bundle processor does not grow the cache. Other callables
(builtins, partials, callable objects) are asked each time, as before. Signatures are immutable, so a remembered
one is the same answer.

:class:`AnyOutput` is the same for one question of construction: the type of a DoFn's outputs, which Beam infers
from the bytecode of its ``process`` and of every function it calls (``trivial_inference``, 0.1 s for the
largest of ours). A DoFn whose answer is ``Any`` anyway (outputs of several kinds) says so at once; the PCollection's
type, and so its coder, is the one Beam would have inferred.

``userstate.get_dofn_specs``, which those checks call, is answered once per DoFn instance the same way: Beam asks it
of one DoFn about eight times (``_specs_per_dofn``).

``cache_signatures`` is installed in the launcher (construction, and the stages it runs in-process) and in SDK
worker processes (``worker.prepare_sdk_worker``); anywhere else Beam runs as it ships. If this Beam has no such
function, nothing is changed.
"""

import types
import weakref


def cache_signatures() -> None:
    """Make Beam's ``get_signature`` remember its answer per function, and ``userstate.get_dofn_specs`` its answer
    per DoFn (once per process)."""
    from apache_beam.transforms import core, ptransform, userstate, util
    from apache_beam.typehints import decorators
    original = getattr(decorators, "get_signature", None)
    if original is not None and not hasattr(original, "beams"):        # not remembering already
        remembering = _remembering(original)
        for module in (decorators, core, ptransform, util):
            if getattr(module, "get_signature", None) is original:
                module.get_signature = remembering
    specs = getattr(userstate, "get_dofn_specs", None)
    if specs is not None and not hasattr(specs, "beams"):
        userstate.get_dofn_specs = _specs_per_dofn(specs)


def _remembering(get_signature):
    remembered = weakref.WeakKeyDictionary()        # function -> {is a bound method: signature}

    def get_signature_once(func):
        if type(func) is types.MethodType:
            function, bound = func.__func__, True
        elif type(func) is types.FunctionType:
            function, bound = func, False
        else:
            return get_signature(func)
        if type(function) is not types.FunctionType:
            return get_signature(func)
        answers = remembered.get(function)
        if answers is None:
            answers = remembered[function] = {}
        signature = answers.get(bound)
        if signature is None:
            signature = answers[bound] = get_signature(func)
        return signature

    get_signature_once.beams = get_signature        # Beam's own, for whoever must compare (tests)
    return get_signature_once


def _specs_per_dofn(get_dofn_specs):
    """Beam's ``get_dofn_specs`` answering once per DoFn instance: it walks every method of the DoFn (``dir``, a
    ``MethodWrapper`` each) and Beam asks it of the same DoFn about eight times, at construction (``ParDo``, each
    ``DoFnSignature``), at translation and in each bundle processor. The answer is made of the DoFn's methods and
    their defaults, which a DoFn does not change once made. A refusal (a ``ValueError``) is not remembered: it is
    raised at every question, as before. Instances are held weakly; one that takes no weak reference is asked each
    time."""
    remembered = {}                                 # id(dofn) -> (weak reference to it, (state specs, timer specs))

    def get_dofn_specs_once(dofn):
        entry = remembered.get(id(dofn))
        if entry is not None and entry[0]() is dofn:
            states, timers = entry[1]
            return set(states), set(timers)
        states, timers = get_dofn_specs(dofn)
        key = id(dofn)
        try:
            reference = weakref.ref(dofn, lambda _, key=key: remembered.pop(key, None))
        except TypeError:
            return states, timers
        remembered[key] = (reference, (frozenset(states), frozenset(timers)))
        return states, timers

    get_dofn_specs_once.beams = get_dofn_specs      # Beam's own, for whoever must compare (tests)
    return get_dofn_specs_once


class AnyOutput:
    """Mixed into a DoFn whose outputs Beam infers as ``Any``: says so without reading its bytecode."""

    def infer_output_type(self, input_type):
        from apache_beam.typehints import Any
        return Any
