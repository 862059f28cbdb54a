"""docs/architecture.md names every product module (issue 41): a module added without a row fails here, so the
map a newcomer reads cannot lag the code.

A row's first cell names modules in backticks: the first with its whole path, the others (``, `b.py`,
`c.py`) relative to the first one's folder; ``shipped/`` names a data folder and is not a module. Every ``.py``
file of the product packages must be named, except an ``__init__.py`` that holds only its docstring (a
package's contents are its modules). A name in the table that is no file fails too: a row cannot outlive
its module.
"""

import ast
import re
from pathlib import Path
from typing import Dict, Set

from conftest import ROOT

DOC = Path(ROOT, "docs", "architecture.md")
PACKAGES = ("beam_pipeline", "trainer", "native_stderr", "command_console")
_NAME = re.compile(r"`([^`]+)`")


def named_in_table(text: str) -> Set[str]:
    """The paths the module table's first column names (relative names resolved against the row's first path)."""
    names = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        found = _NAME.findall(first_cell)
        if not found or "/" not in found[0]:
            continue
        folder = found[0].rsplit("/", 1)[0]
        names.add(found[0])
        names.update(name if "/" in name.rstrip("/") else f"{folder}/{name}" for name in found[1:])
    return names


def _has_code(source: str) -> bool:
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return bool(body)


def product_modules(root: str = ROOT) -> Dict[str, bool]:
    """{path: whether the table must name it} for every module of the product packages."""
    modules = {}
    for package in PACKAGES:
        for path in sorted(Path(root, package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            modules[relative] = path.name != "__init__.py" or _has_code(path.read_text(encoding="utf-8"))
    return modules


def missing_and_stale(text: str, root: str = ROOT):
    named = named_in_table(text)
    modules = product_modules(root)
    missing = sorted(path for path, required in modules.items() if required and path not in named)
    stale = sorted(name for name in named
                   if name.startswith(PACKAGES) and not name.endswith("/") and not Path(root, name).exists())
    return missing, stale


def test_every_product_module_has_a_row_and_every_row_a_module():
    missing, stale = missing_and_stale(DOC.read_text(encoding="utf-8"))
    assert missing == [], f"add these modules to docs/architecture.md's table: {missing}"
    assert stale == [], f"docs/architecture.md names modules that are not there: {stale}"


def test_the_check_sees_a_module_left_out_and_a_row_left_behind():
    text = DOC.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `beam_pipeline/core/points.py`"))
    missing, _ = missing_and_stale(text.replace(row + "\n", ""))
    assert missing == ["beam_pipeline/core/points.py"]
    _, stale = missing_and_stale(text + "| `beam_pipeline/core/gone.py`, `also_gone.py` | a row of no module |\n")
    assert stale == ["beam_pipeline/core/also_gone.py", "beam_pipeline/core/gone.py"]


def test_relative_names_are_taken_against_the_rows_first_path():
    assert named_in_table("| `beam_pipeline/io/cache/__init__.py`, `verdicts.py` | x |\n"
                          "| `trainer/serving/` | y |\n") == {
        "beam_pipeline/io/cache/__init__.py", "beam_pipeline/io/cache/verdicts.py", "trainer/serving/"}
