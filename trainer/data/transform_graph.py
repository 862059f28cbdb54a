"""The pipeline's tf.Transform graph, loaded with plain TensorFlow: raw features in, model-ready tensors out.

tf.Transform writes the graph (``transform/transform_fn/``, with ``force_tf_compat_v1=False`` in
beam_pipeline/stages/stats.py) as a TF2 SavedModel whose ``transform_fn`` maps a batch of raw features to
the transformed ones. ``tft.TFTransformOutput`` loads it with ``tf.saved_model.load`` and calls that
function; so does this module, and nothing of tf.Transform or tfx-bsl is needed where the model trains.
The raw feature spec is read from the function's input signature (a ``[None]`` input is a scalar
feature, ``[None, 3]`` a feature of three values, a sparse one a VarLenFeature).

Before loading, the graph's ops are read from ``saved_model.pb``, and a graph this TensorFlow cannot run
is refused with one line that names the cause (:class:`TransformGraphError`):

- a TF1 export (``force_tf_compat_v1=True``): it has no ``transform_fn``;
- Python functions in the graph (``tft.apply_pyfunc``, ``tf.py_function``): a saved graph holds only a
  reference to a function of the process that wrote it;
- ops this TensorFlow does not register: those of a package not installed (tensorflow_text,
  struct2tensor, ...) or of a newer TensorFlow. tf.Transform imports such packages when it loads a graph;
  this module does not.

A leaf: it imports TensorFlow only (trainer/data/decode.py and trainer/export/signature.py use it).
"""

import posixpath
from typing import Dict, List

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

TRANSFORM_FN_DIR = "transform_fn"          # tf.Transform's SavedModel inside its output folder
TF1_TAG = "transform"                      # the tag and signature of a TF1 export (tensorflow_transform.saved)
TF1_SIGNATURE = "transform_signature"
PYTHON_FUNCTION_OPS = ("PyFunc", "PyFuncStateless", "EagerPyFunc")


class TransformGraphError(ValueError):
    """The tf.Transform output cannot be run by this TensorFlow without tf.Transform; one line."""


def _saved_model_proto(path: str) -> saved_model_pb2.SavedModel:
    proto = saved_model_pb2.SavedModel()
    file = posixpath.join(path, "saved_model.pb")
    if not tf.io.gfile.exists(file):
        raise TransformGraphError(f"no tf.Transform graph at {path} (saved_model.pb is missing)")
    with tf.io.gfile.GFile(file, "rb") as handle:
        proto.ParseFromString(handle.read())
    return proto


def _op_types(proto: saved_model_pb2.SavedModel) -> List[str]:
    """The op types every graph and function of the SavedModel uses, calls of its own functions left out."""
    used, defined = set(), set()
    for meta_graph in proto.meta_graphs:
        library = meta_graph.graph_def.library
        defined.update(function.signature.name for function in library.function)
        used.update(node.op for node in meta_graph.graph_def.node)
        for function in library.function:
            used.update(node.op for node in function.node_def)
    return sorted(used - defined)


def check_runnable(path: str) -> None:
    """Raise TransformGraphError, naming the cause, for a graph this TensorFlow cannot run without tf.Transform."""
    proto = _saved_model_proto(path)
    tags = {tag for meta_graph in proto.meta_graphs for tag in meta_graph.meta_info_def.tags}
    signatures = {name for meta_graph in proto.meta_graphs for name in meta_graph.signature_def}
    ops = _op_types(proto)
    python = [op for op in ops if op in PYTHON_FUNCTION_OPS]
    if TF1_TAG in tags or TF1_SIGNATURE in signatures:
        also = f"; it also calls Python functions ({', '.join(python)} ops)" if python else ""
        raise TransformGraphError(
            f"the tf.Transform graph at {path} is a TF1 export (tft_beam.Context(force_tf_compat_v1=True)), which "
            f"only tf.Transform can run{also}: re-run the pipeline, which writes TF2 graphs")
    if python:
        raise TransformGraphError(
            f"the tf.Transform graph at {path} calls Python functions ({', '.join(python)} ops, from "
            "tft.apply_pyfunc or tf.py_function), which a saved graph cannot carry: the preprocessing must use "
            "TensorFlow ops only")
    unknown = [op for op in ops if op_def_registry.get(op) is None]
    if unknown:
        raise TransformGraphError(
            f"the tf.Transform graph at {path} needs ops that TensorFlow {tf.__version__} here does not have: "
            f"{', '.join(unknown)} (ops of a package that is not installed, such as tensorflow_text, or of a "
            "newer TensorFlow); the trainer runs graphs of core TensorFlow ops")


def _feature(name: str, spec) -> object:
    """The tf.io parsing spec of one input of ``transform_fn``'s signature."""
    if isinstance(spec, tf.TensorSpec) and spec.shape.rank >= 1 and spec.shape[1:].is_fully_defined():
        return tf.io.FixedLenFeature(spec.shape[1:].as_list(), spec.dtype)
    if isinstance(spec, tf.SparseTensorSpec) and spec.shape.rank == 2:
        return tf.io.VarLenFeature(spec.dtype)
    raise TransformGraphError(f"the tf.Transform graph's input {name!r} is {spec}: the trainer reads dense "
                              "features of a fixed shape and sparse (VarLen) features only")


class TransformGraph(tf.Module):
    """``transform_fn`` of a tf.Transform output folder; a tf.Module, so a served model that holds it saves it."""

    def __init__(self, transform_dir: str):
        super().__init__(name="transform_graph")
        path = posixpath.join(transform_dir.rstrip("/"), TRANSFORM_FN_DIR)
        check_runnable(path)
        self.saved = tf.saved_model.load(path)
        function = self.saved.transform_fn
        if hasattr(function, "concrete_functions"):      # a tf.function saved with its input signature
            (function,) = function.concrete_functions
        self._function = function
        self.raw_feature_spec             # refuses a signature it cannot parse for, now

    @property
    def raw_feature_spec(self) -> Dict[str, object]:
        """{raw feature name: tf.io.FixedLenFeature or VarLenFeature}, from ``transform_fn``'s input signature
        (computed on each call: a dict kept on a tf.Module would be wrapped for tracking)."""
        (inputs,), _ = self._function.structured_input_signature
        return {name: _feature(name, spec) for name, spec in inputs.items()}

    @property
    def output_names(self) -> List[str]:
        return sorted(self._function.structured_outputs)

    def __call__(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """Batched raw features (every name of ``raw_feature_spec``) -> the graph's outputs, batched."""
        return self._function({name: features[name] for name in self.raw_feature_spec})
