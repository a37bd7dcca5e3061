"""One row per chaos cell, and the table ``make chaos`` prints and writes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CellResult:
    """What one cell saw. ``None`` figures were not measured (the cell broke before)."""

    fault: str
    step: str
    seconds: float
    hit: str = "?"  # the step the rollout was in when the fault went in (the progress query)
    outcome: str = "not run"  # promoted | rolled_back: <reason> | failed: <reason> | error: …
    duplicates: int | None = None
    runs: int | None = None  # RolloutWorkflow runs of the candidate's revision (Temporal)
    in_step: bool | None = None  # the rollout's history shows the fault in the step
    orphans: int | None = None
    stable_ok: int = 0
    stable_total: int = 0
    recovery: float | None = None  # seconds from the fault clearing to the next step change
    moved_during_fault: bool = False
    wall: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def stable_answered(self) -> bool:
        return self.stable_total > 0 and self.stable_ok == self.stable_total

    @property
    def passed(self) -> bool:
        return (
            self.outcome == "promoted"
            and self.duplicates == 0
            and self.runs == 1
            and self.in_step is True
            and self.orphans == 0
            and self.stable_answered
        )

    def problems(self) -> list[str]:
        found = [] if self.outcome == "promoted" else [f"outcome {self.outcome}"]
        if self.duplicates != 0:
            found.append(f"duplicates {self.duplicates}")
        if self.runs != 1:
            found.append(f"rollout runs {self.runs}")
        if self.in_step is not True:
            found.append("fault not in its step by the history")
        if self.orphans != 0:
            found.append(f"orphans {self.orphans}")
        if not self.stable_answered:
            found.append(f"stable answered {self.stable_ok}/{self.stable_total}")
        return found


COLUMNS = ("fault", "step", "held", "hit", "in step", "outcome", "dup", "runs", "orphans",
           "stable answered", "recovery s", "wall s", "result")  # fmt: skip


def _figure(value: int | None) -> str:
    return "-" if value is None else str(value)


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def _recovery(row: CellResult) -> str:
    if row.recovery is None:
        return "-"
    return f"{row.recovery:.1f}" + ("*" if row.moved_during_fault else "")


def _cells(row: CellResult) -> tuple[str, ...]:
    stable = f"{'yes' if row.stable_answered else 'NO'} {row.stable_ok}/{row.stable_total}"
    return (
        row.fault, row.step, f"{row.seconds:g}s", row.hit, _yes(row.in_step), row.outcome,
        _figure(row.duplicates), _figure(row.runs), _figure(row.orphans), stable, _recovery(row),
        f"{row.wall:.0f}", "pass" if row.passed else "FAIL",
    )  # fmt: skip


def render(rows: list[CellResult]) -> str:
    lines = [COLUMNS, *(_cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    text = ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    passed = sum(r.passed for r in rows)
    text.append("")
    text.append(f"{passed}/{len(rows)} cells passed.")
    text.append(
        "hit: the rollout's step (progress query) when the fault went in; in step: its own "
        "history shows the step open then. dup: a second Deployment, Job or PVC of a "
        "revision; runs: RolloutWorkflow runs of the candidate's revision. recovery: seconds "
        "from the fault clearing to the rollout's next step change; * the rollout also moved "
        "while the fault was on; - no change after it cleared (finished during the fault)."
    )
    for row in rows:
        for note in row.notes:
            text.append(f"{row.fault}/{row.step}: {note}")
    return "\n".join(text) + "\n"
