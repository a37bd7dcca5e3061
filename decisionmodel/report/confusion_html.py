"""Per-label confusion matrices as HTML tables, one per question type present. Rows are the
expected class, columns the answered one; a cell's shade is its share of the row."""

from __future__ import annotations

from html import escape

from decisionmodel.api.status import ConfusionCellStatus
from decisionmodel.evaluation.confusion import KINDS, NONE, kind_labels

_TITLES = {"noul": "yes/no (noul)", "score": "score levels", "choice": "choice options"}


def confusion_tables(cells: list[ConfusionCellStatus]) -> str:
    out = []
    for kind in KINDS:
        mine = [c for c in cells if c.kind == kind]
        if mine:
            out.append(_table(kind, mine))
    if not out:
        return "<p>No confusion counts were recorded for this evaluation.</p>"
    return "\n".join(out)


def _table(kind: str, cells: list[ConfusionCellStatus]) -> str:
    known = kind_labels(kind)  # type: ignore[arg-type]
    used = {c.expected for c in cells} | {c.predicted for c in cells}
    rows = [label for label in known if label in {c.expected for c in cells}]
    cols = [label for label in (*known, NONE) if label in used]
    counts = {(c.expected, c.predicted): c.count for c in cells}
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        total = sum(counts.get((r, c), 0) for c in cols) or 1
        tds = []
        for c in cols:
            n = counts.get((r, c), 0)
            shade = round(255 - 160 * n / total)
            colour = f"rgb({shade},{shade},255)" if r == c else f"rgb(255,{shade},{shade})"
            tds.append(f'<td style="background:{colour}">{n}</td>' if n else "<td>·</td>")
        body.append(f"<tr><th>{escape(r)}</th>{''.join(tds)}</tr>")
    return (
        f'<table class="confusion" data-kind="{kind}"><caption>{_TITLES[kind]}: expected '
        f"(rows) against answered (columns)</caption><tr><th></th>{head}</tr>"
        + "".join(body)
        + "</table>"
    )
