"""A safe, small expression language for ``--filter`` over the input listing's columns.

Example: ``source == 'camA' and capture_year >= 2020 and split in ('train', 'val')``.

The text is parsed with :func:`ast.parse` and then *interpreted* node by node;
nothing is ever passed to ``eval``. Only these nodes are allowed: ``and``,
``or``, ``not``, comparisons (``== != < <= > >= in``, ``not in``), column
names, and string / number / boolean / None literals, alone or in a tuple or
list. Anything else (calls, attributes, subscripts, arithmetic) is refused when
the expression is compiled, with a message that points at the offending part.

CSV columns arrive as strings; when a comparison meets a string and a number,
the string is converted to a number, so ``capture_year >= 2020`` works on CSV,
JSON-lines and Parquet listings alike.
"""

import ast
import dataclasses
import operator
from typing import Any, Mapping, Tuple

_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}


class FilterSyntaxError(ValueError):
    """The --filter text is not a valid expression of the allowed form."""


class FilterEvalError(ValueError):
    """The expression could not be evaluated on one row (missing column, bad type)."""


def _literal(node: ast.AST, text: str):
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, int, float, bool))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)):
        return -node.operand.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_literal(element, text) for element in node.elts)
    raise FilterSyntaxError(f"--filter: only literals are allowed here, not {ast.get_source_segment(text, node)!r}")


def _compile(node: ast.AST, text: str):
    """Turn the AST into nested tuples that :func:`_evaluate` interprets."""
    if isinstance(node, ast.BoolOp):
        kind = "and" if isinstance(node.op, ast.And) else "or"
        return (kind, tuple(_compile(value, text) for value in node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ("not", _compile(node.operand, text))
    if isinstance(node, ast.Compare):
        terms = [_operand(node.left, text)] + [_operand(c, text) for c in node.comparators]
        ops = []
        for op in node.ops:
            if type(op) in _COMPARE:
                ops.append(type(op).__name__)
            elif isinstance(op, ast.In):
                ops.append("In")
            elif isinstance(op, ast.NotIn):
                ops.append("NotIn")
            else:
                raise FilterSyntaxError(f"--filter: operator {type(op).__name__} is not allowed")
        return ("compare", tuple(terms), tuple(ops))
    if isinstance(node, ast.Name):
        return ("truthy", ("column", node.id))
    raise FilterSyntaxError(
        f"--filter: {ast.get_source_segment(text, node)!r} is not allowed; use comparisons of columns "
        "with literals joined by and/or/not")


def _operand(node: ast.AST, text: str):
    if isinstance(node, ast.Name):
        return ("column", node.id)
    return ("literal", _literal(node, text))


def _columns(tree) -> Tuple[str, ...]:
    """Column names used anywhere in a compiled tree, in order of appearance."""
    if not isinstance(tree, tuple):
        return ()
    if len(tree) == 2 and tree[0] == "column":
        return (tree[1],)
    if len(tree) == 2 and tree[0] == "literal":
        return ()
    names = []
    for part in tree:
        names.extend(_columns(part))
    return tuple(dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class FilterExpression:
    """A compiled --filter. Picklable, so it travels to remote workers."""
    text: str
    tree: tuple

    @property
    def columns(self) -> Tuple[str, ...]:
        return _columns(self.tree)

    def __call__(self, row: Mapping[str, Any]) -> bool:
        return bool(_evaluate(self.tree, row))


def parse_filter(text: str) -> FilterExpression:
    try:
        module = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise FilterSyntaxError(f"--filter: cannot parse {text!r}: {error.msg}") from None
    return FilterExpression(text=text, tree=_compile(module.body, text.strip()))


def _coerce_pair(left, right):
    """Compare strings with numbers numerically (CSV gives every column as text)."""
    if isinstance(left, str) and isinstance(right, (int, float)) and not isinstance(right, bool):
        return _to_number(left), right
    if isinstance(right, str) and isinstance(left, (int, float)) and not isinstance(left, bool):
        return left, _to_number(right)
    return left, right


def _to_number(text: str):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise FilterEvalError(f"value {text!r} is not a number") from None


def _value(term, row: Mapping[str, Any]):
    kind, payload = term
    if kind == "literal":
        return payload
    if payload not in row:
        raise FilterEvalError(f"no column {payload!r}")
    return row[payload]


def _compare(op: str, left, right) -> bool:
    if op in ("In", "NotIn"):
        options = right if isinstance(right, tuple) else (right,)
        found = any(_compare("Eq", left, option) for option in options)
        return found if op == "In" else not found
    left, right = _coerce_pair(left, right)
    try:
        return _COMPARE[getattr(ast, op)](left, right)
    except TypeError:
        raise FilterEvalError(f"cannot compare {left!r} {op} {right!r}") from None


def _evaluate(tree, row):
    kind = tree[0]
    if kind == "and":
        return all(_evaluate(part, row) for part in tree[1])
    if kind == "or":
        return any(_evaluate(part, row) for part in tree[1])
    if kind == "not":
        return not _evaluate(tree[1], row)
    if kind == "truthy":
        return bool(_value(tree[1], row))
    _, terms, ops = tree
    values = [_value(term, row) for term in terms]
    return all(_compare(op, values[i], values[i + 1]) for i, op in enumerate(ops))
