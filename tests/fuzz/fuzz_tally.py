"""The fuzz wall's counts, printed at the end of the run and written to build/fuzz-counts.txt."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from harness.tiers import full

# `make fuzz` sets DMROLLOUT_FULL=fuzz: 10,000 examples per target; `make test` runs 200.
FULL = full("fuzz")
EXAMPLES = int(os.environ.get("DMROLLOUT_FUZZ_EXAMPLES", "10000" if FULL else "200"))
SHOWN = 5  # problems quoted per kind in a failure message


@dataclass
class Tally:
    """Counts of one fuzz target; `problems` holds what must be zero, with a few examples."""

    target: str
    counts: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    problems: dict[str, list[str]] = field(default_factory=dict)

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] += n

    def problem(self, kind: str, detail: str) -> None:
        self.counts[kind] += 1
        shown = self.problems.setdefault(kind, [])
        if len(shown) < SHOWN:
            shown.append(detail[:1500])

    def failed(self) -> bool:
        return bool(self.problems)

    def summary(self) -> str:
        lines = [f"{self.target}:"]
        lines += [f"  {key:<34} {value:>7}" for key, value in sorted(self.counts.items())]
        if self.reasons:
            lines.append("  typed errors by reason:")
            lines += [f"    {key:<32} {value:>7}" for key, value in self.reasons.most_common()]
        for kind, shown in self.problems.items():
            lines.append(f"  {kind} (first {len(shown)}):")
            lines += [f"    - {text}" for text in shown]
        return "\n".join(lines)
