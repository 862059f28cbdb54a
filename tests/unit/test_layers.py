"""The house's layers, read from the imports with ``ast`` (issue 22): no import circle, no import against
the layer order, no Beam or TensorFlow in ``beam_pipeline/core``, no coupling between the two packages.

The order, from the top (each layer may import the layers after it, never one before it):

    commands   beam_pipeline/__main__.py, verify.py, report/__main__.py
    launcher   beam_pipeline/launcher/
    stages     beam_pipeline/stages/        report   beam_pipeline/report/   (one rank: neither imports the other)
    io         beam_pipeline/io/
    core       beam_pipeline/core/

Shared leaves (``beam_pipeline/console.py``, ``beam_pipeline/phases.py``, the ``native_stderr`` and
``command_console`` packages and the package's own ``__init__``) may be imported from anywhere and import only
each other.

The trainer's role folders have an order of their own, checked the same way:

    commands            trainer/__main__.py, evaluate.py, serve.py
    serving, training   trainer/serving/, trainer/training/          (one rank: neither imports the other)
    export, evaluation  trainer/export/, trainer/evaluation/         (training validates with evaluation's metrics)
    models, data        trainer/models/, trainer/data/

with ``trainer/console.py`` and ``trainer/__init__.py`` its leaves. Every import
counts, the ones inside functions too: a lazy import still makes the modules depend on each other.
``trainer/`` imports neither ``beam_pipeline``, ``apache_beam``, ``tensorflow_transform`` nor ``tfx_bsl`` (coupled through the
artifacts), and no product module imports the test-data tools or the benchmarks.

The checker is run on the real tree, and on the real tree with a bad import planted in it, so that a
guard that checks nothing cannot pass.
"""

import ast
import os
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest

from conftest import ROOT

PRODUCT_PACKAGES = ("beam_pipeline", "trainer", "native_stderr", "command_console")
SHARED_LEAVES = ("native_stderr", "command_console")        # top-level leaf packages both consoles use
COMMANDS = ("beam_pipeline.__main__", "beam_pipeline.verify", "beam_pipeline.report.__main__")
LEAVES = ("beam_pipeline", "beam_pipeline.console", "beam_pipeline.phases") + SHARED_LEAVES
TRAINER_COMMANDS = ("trainer.__main__", "trainer.evaluate", "trainer.serve")
TRAINER_LEAVES = ("trainer", "trainer.console")
# (layer, module prefix, rank): a module may import a module of the same layer, of a higher rank, or a leaf.
LAYERS = (("launcher", "beam_pipeline.launcher", 1), ("stages", "beam_pipeline.stages", 2),
          ("report", "beam_pipeline.report", 2), ("io", "beam_pipeline.io", 3), ("core", "beam_pipeline.core", 4))
TRAINER_LAYERS = (("serving", "trainer.serving", 1), ("training", "trainer.training", 1),
                  ("export", "trainer.export", 2), ("evaluation", "trainer.evaluation", 2),
                  ("models", "trainer.models", 3), ("data", "trainer.data", 3))
COMMANDS_RANK = 0
CORE_FORBIDDEN = ("apache_beam", "tensorflow", "tensorflow_transform", "tfx_bsl", "tensorflow_metadata", "keras")
# The trainer reads the artifacts with TensorFlow alone: its own install (requirements-trainer.txt) has no Beam,
# no tf.Transform and no tfx-bsl (trainer/data/transform_graph.py loads the transform graph).
TRAINER_FORBIDDEN = ("apache_beam", "beam_pipeline", "tools", "bench", "tensorflow_transform", "tfx_bsl")
PRODUCT_FORBIDDEN = ("tools", "bench", "tests", "conftest")
MAX_LINES = 400       # a smoke alarm, not a target: a module holds one concern whole, and one this long is read again
LINE_LIMITED = ("beam_pipeline", "trainer", "tools", "bench") + SHARED_LEAVES


def product_sources(root: str = ROOT) -> Dict[str, str]:
    """``{module name: source}`` of every module of the product packages."""
    sources = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted(Path(root, package).rglob("*.py")):
            relative = path.relative_to(root).with_suffix("")
            parts = list(relative.parts)
            if parts[-1] == "__init__":
                parts.pop()
            sources[".".join(parts)] = path.read_text(encoding="utf-8")
    return sources


def _is_package(module: str, sources: Dict[str, str]) -> bool:
    return any(name.startswith(module + ".") for name in sources)


def imports_of(module: str, source: str, sources: Dict[str, str]) -> List[Tuple[str, int]]:
    """``(imported module, line)`` for every import in ``source``, at any depth (functions included).

    ``from a.b import c`` imports the module ``a.b.c`` when there is one, else the names of ``a.b``.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if _is_package(module, sources) else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.append((candidate if candidate in sources else base, node.lineno))
    return found


def layer_of(module: str) -> Optional[Tuple[str, int]]:
    """``(layer, rank)`` of a beam_pipeline or trainer module; None for leaves and modules of other packages.
    The trainer's layers are named ``trainer <layer>``: the two orders never meet (neither package imports
    the other)."""
    if module in COMMANDS:
        return "commands", COMMANDS_RANK
    if module in TRAINER_COMMANDS:
        return "trainer commands", COMMANDS_RANK
    if module in LEAVES + TRAINER_LEAVES or _within(module, SHARED_LEAVES):
        return None
    for layer, prefix, rank in TRAINER_LAYERS:
        if _within(module, (prefix,)):
            return f"trainer {layer}", rank
    for layer, prefix, rank in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer, rank
    return None


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _within(name: str, roots) -> bool:
    return any(name == root or name.startswith(root + ".") for root in roots)


def layer_violations(sources: Dict[str, str]) -> List[str]:
    """Every import against the rules above, as ``module:line imports target: why``."""
    problems = []
    for module, source in sorted(sources.items()):
        for target, line in imports_of(module, source, sources):
            where = f"{module}:{line} imports {target}"
            if _within(module, ("beam_pipeline",)) and _within(target, PRODUCT_FORBIDDEN + ("trainer",)):
                problems.append(f"{where}: the pipeline never imports the trainer, tools, benchmarks or tests")
            if _within(module, ("trainer",)) and _within(target, TRAINER_FORBIDDEN):
                problems.append(f"{where}: the trainer reads artifacts, it imports neither Beam, the pipeline nor "
                                "tf.Transform")
            if _within(module, ("beam_pipeline.core",)) and _within(target, CORE_FORBIDDEN):
                problems.append(f"{where}: core/ is pure: no apache_beam, no tensorflow")
            if target not in sources:
                continue                        # a third-party or standard-library module
            is_leaf = layer_of(module) is None and _within(module, ("beam_pipeline", "trainer"))
            if (is_leaf and _top(module) == _top(target) and layer_of(target) is not None) or (
                    _within(module, SHARED_LEAVES) and not _within(target, SHARED_LEAVES)):
                problems.append(f"{where}: a shared leaf imports only other leaves")
            mine, theirs = layer_of(module), layer_of(target)
            if mine is None or theirs is None or mine[0] == theirs[0]:
                continue
            if theirs[1] <= mine[1]:
                order = ("commands -> serving, training -> export, evaluation -> models, data" if
                         _top(module) == "trainer" else "commands -> launcher -> stages, report -> io -> core")
                problems.append(f"{where}: {mine[0]} may not import {theirs[0]} (the order is {order})")
    return problems


def import_graph(sources: Dict[str, str]) -> Dict[str, Set[str]]:
    return {module: {target for target, _ in imports_of(module, source, sources)
                     if target in sources and target != module}
            for module, source in sources.items()}


def import_circles(sources: Dict[str, str]) -> List[List[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    graph = import_graph(sources)
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


# --------------------------------------------------------------------------
# The real tree
# --------------------------------------------------------------------------
def test_the_tree_has_the_expected_folders():
    sources = product_sources()
    for _, prefix, _ in LAYERS:
        assert prefix in sources, f"{prefix} is missing or has no __init__.py"
        assert ast.get_docstring(ast.parse(sources[prefix])), f"{prefix}/__init__.py says what the folder owns"
    assert {name for name in sources if name.startswith("beam_pipeline.") and name.count(".") == 1
            and not _is_package(name, sources)} == set(COMMANDS[:2]) | set(LEAVES[1:3])


def test_the_trainer_has_its_role_folders_and_only_commands_and_leaves_beside_them():
    sources = product_sources()
    for _, prefix, _ in TRAINER_LAYERS:
        assert prefix in sources, f"{prefix} is missing or has no __init__.py"
        assert ast.get_docstring(ast.parse(sources[prefix])), f"{prefix}/__init__.py says what the folder owns"
    top = {name for name in sources if name.startswith("trainer.") and name.count(".") == 1
           and not _is_package(name, sources)}
    assert top == set(TRAINER_COMMANDS) | set(TRAINER_LEAVES[1:])
    assert {name for name in sources if _top(name) == "trainer" and name not in TRAINER_LEAVES
            and layer_of(name) is None} == set()      # every trainer module is in a layer, or a leaf


def test_no_import_circle():
    assert import_circles(product_sources()) == []


def test_no_import_against_the_layer_order():
    assert layer_violations(product_sources()) == []


def test_core_states_and_keeps_its_contract():
    sources = product_sources()
    docstring = ast.get_docstring(ast.parse(sources["beam_pipeline.core"]))
    assert "no apache_beam and no tensorflow" in docstring
    core = {name: source for name, source in sources.items() if name.startswith("beam_pipeline.core")}
    imported = {_top(target) for name, source in core.items() for target, _ in imports_of(name, source, sources)}
    assert imported.isdisjoint(CORE_FORBIDDEN)
    assert {"numpy", "PIL"} <= imported        # the checker sees core's real imports


# --------------------------------------------------------------------------
# The guard fails when a bad import is planted
# --------------------------------------------------------------------------
def _planted(module: str, line: str) -> Dict[str, str]:
    sources = dict(product_sources())
    sources[module] = sources[module] + f"\n\ndef _planted():\n    {line}\n"
    return sources


@pytest.mark.parametrize("module, line, expected", [
    ("beam_pipeline.io.files", "from beam_pipeline.launcher import config",
     "beam_pipeline.io.files:{n} imports beam_pipeline.launcher.config: io may not import launcher"),
    ("beam_pipeline.core.paths", "from beam_pipeline.stages.pairs import check",
     "beam_pipeline.core.paths:{n} imports beam_pipeline.stages.pairs: core may not import stages"),
    ("beam_pipeline.stages.write", "from beam_pipeline.report import render_report",
     "beam_pipeline.stages.write:{n} imports beam_pipeline.report: stages may not import report"),
    ("beam_pipeline.launcher.commit", "from beam_pipeline import verify",
     "beam_pipeline.launcher.commit:{n} imports beam_pipeline.verify: launcher may not import commands"),
    ("beam_pipeline.console", "from beam_pipeline.launcher.options import CorpusOptions",
     "beam_pipeline.console:{n} imports beam_pipeline.launcher.options: a shared leaf imports only other leaves"),
    ("beam_pipeline.core.hashing", "import apache_beam",
     "beam_pipeline.core.hashing:{n} imports apache_beam: core/ is pure: no apache_beam, no tensorflow"),
    ("beam_pipeline.core.masks", "import tensorflow as tf",
     "beam_pipeline.core.masks:{n} imports tensorflow: core/ is pure: no apache_beam, no tensorflow"),
    ("trainer.data.input", "from beam_pipeline.core import features",
     "trainer.data.input:{n} imports beam_pipeline.core.features: the trainer reads artifacts"),
    ("beam_pipeline.stages.validate", "from tools.sample_corpus import write_corpus",
     "beam_pipeline.stages.validate:{n} imports tools.sample_corpus: the pipeline never imports the trainer"),
    ("trainer.data.decode", "import tensorflow_transform as tft",
     "trainer.data.decode:{n} imports tensorflow_transform: the trainer reads artifacts"),
    ("trainer.export.signature", "from tfx_bsl.public import tfxio",
     "trainer.export.signature:{n} imports tfx_bsl.public: the trainer reads artifacts"),
    ("trainer.data.decode", "from trainer.models.networks import build_model",
     "trainer.data.decode:{n} imports trainer.models.networks: trainer data may not import trainer models"),
    ("trainer.models.losses", "from trainer.training import strategy",
     "trainer.models.losses:{n} imports trainer.training.strategy: trainer models may not import trainer training"),
    ("trainer.evaluation.metrics", "from trainer.training.validation import WholeImageValidation",
     "trainer.evaluation.metrics:{n} imports trainer.training.validation: trainer evaluation may not import "
     "trainer training"),
    ("trainer.training.train", "from trainer.serving.predict import ModelService",
     "trainer.training.train:{n} imports trainer.serving.predict: trainer training may not import trainer serving"),
    ("trainer.export.signature", "from trainer.evaluation import metrics",
     "trainer.export.signature:{n} imports trainer.evaluation.metrics: trainer export may not import trainer "
     "evaluation"),
    ("trainer.serving.predict", "import trainer.serve",
     "trainer.serving.predict:{n} imports trainer.serve: trainer serving may not import trainer commands"),
    ("trainer.console", "from trainer.data.artifacts import MANIFEST",
     "trainer.console:{n} imports trainer.data.artifacts: a shared leaf imports only other leaves"),
    ("command_console", "from trainer.data import artifacts",
     "command_console:{n} imports trainer.data.artifacts: a shared leaf imports only other leaves"),
], ids=["io-up-to-launcher", "core-up-to-stages", "stages-to-report", "launcher-up-to-command", "leaf-to-launcher",
        "beam-in-core", "tensorflow-in-core", "trainer-to-pipeline", "product-to-tools", "tft-in-trainer",
        "tfx-bsl-in-trainer", "trainer-data-up-to-models", "trainer-models-up-to-training",
        "trainer-evaluation-up-to-training", "trainer-training-to-serving", "trainer-export-to-evaluation",
        "trainer-serving-up-to-command", "trainer-leaf-to-data", "shared-leaf-to-trainer"])
def test_a_planted_import_against_the_rules_is_found(module, line, expected):
    sources = _planted(module, line)
    planted_line = sources[module].count("\n") - 0
    found = layer_violations(sources)
    assert len(found) == 1 and found[0].startswith(expected.format(n=planted_line)), found


def test_a_planted_circle_is_found():
    sources = _planted("beam_pipeline.io.listing", "from beam_pipeline.io import streams")
    sources["beam_pipeline.io.streams"] += "\n\ndef _back():\n    from beam_pipeline.io import listing\n"
    assert import_circles(sources) == [["beam_pipeline.io.listing", "beam_pipeline.io.streams"]]
    assert layer_violations(sources) == []          # a circle within one layer is still a circle


def test_a_planted_trainer_circle_is_found():
    sources = _planted("trainer.data.decode", "from trainer.data import balance")
    assert import_circles(sources) == [["trainer.data.balance", "trainer.data.decode"]]


def test_the_checker_resolves_submodules_and_names():
    sources = product_sources()
    resolved = dict(imports_of("x", "from beam_pipeline.io import files\nfrom beam_pipeline.report import "
                                    "render_report\nfrom beam_pipeline import console", sources))
    assert set(resolved) == {"beam_pipeline.io.files", "beam_pipeline.report", "beam_pipeline.console"}


# --------------------------------------------------------------------------
# House rules that a reader of the tree relies on
# --------------------------------------------------------------------------
def test_no_product_tool_or_bench_file_is_over_the_line_ceiling():
    long = []
    for folder in LINE_LIMITED:
        for path in sorted(Path(ROOT, folder).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").count("\n")
            if lines > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert long == []


def test_no_path_of_one_machine_stands_in_the_code():
    machine_paths = ("/work/", "/home/", "/root/", "/Users/")
    found = []
    for folder in LINE_LIMITED:
        for path in sorted(Path(ROOT, folder).rglob("*.py")):
            for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if any(root in text for root in machine_paths):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {text.strip()}")
    assert found == []


def test_every_product_folder_says_what_it_owns():
    for folder in sorted({path.parent for package in PRODUCT_PACKAGES for path in Path(ROOT, package).rglob("*.py")}):
        init = folder / "__init__.py"
        assert init.exists() and ast.get_docstring(ast.parse(init.read_text())), f"{os.path.relpath(init, ROOT)}"
