"""The report's small HTML pieces: escaping, numbers, tables, cells, charts and sections."""

import html
from typing import Iterable, Sequence

from beam_pipeline.report.images import svg_data_uri


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def number(value) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


def percent(value: float) -> str:
    return f"{100 * value:.3f} %" if value < 0.01 else f"{100 * value:.2f} %"


def table(headers: Sequence[str], rows: Iterable[str], table_id: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def cell(value, numeric: bool = False) -> str:
    return f'<td class="n">{esc(value)}</td>' if numeric else f"<td>{esc(value)}</td>"


def chart(svg: str, alt: str) -> str:
    return f'<img class="chart" alt="{esc(alt)}" src="{svg_data_uri(svg)}">'


def section(section_id: str, title: str, body: str) -> str:
    return f'<section id="{esc(section_id)}"><h2>{esc(title)}</h2>{body}</section>'
