"""Tables printed at the end of a run (the chaos matrix, the fuzz counts), also with xdist.

A suite's conftest adds its table with ``add``; ``tests/conftest.py`` prints and writes them all
at the end. Under ``pytest -n`` the tables are made in the workers, which print nothing: each
worker relays its tables to the controller (xdist's ``workeroutput``), which prints and writes
them. Two workers' tables for the same file are joined in it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

SUMMARIES = pytest.StashKey[list["Summary"]]()
RELAY_KEY = "dmrollout-summaries"


@dataclass(frozen=True)
class Summary:
    title: str
    text: str
    path: str  # relative to the rootdir


def add(config: pytest.Config, summary: Summary) -> None:
    config.stash.setdefault(SUMMARIES, []).append(summary)


def relay(config: pytest.Config) -> None:
    """In an xdist worker: hand this worker's tables to the controller."""
    output = getattr(config, "workeroutput", None)
    if output is not None:
        output[RELAY_KEY] = json.dumps([asdict(s) for s in config.stash.get(SUMMARIES, [])])


def receive(config: pytest.Config, workeroutput: dict[str, object]) -> None:
    """In the xdist controller: keep a finished worker's tables."""
    raw = workeroutput.get(RELAY_KEY)
    if isinstance(raw, str):
        for item in json.loads(raw):
            add(config, Summary(**item))


def report(config: pytest.Config, reporter: pytest.TerminalReporter) -> None:
    """Write every table to its file (joined per file) and print it."""
    by_path: dict[str, list[Summary]] = {}
    for summary in config.stash.get(SUMMARIES, []):
        by_path.setdefault(summary.path, []).append(summary)
    for rel, summaries in by_path.items():
        path = Path(config.rootpath) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(s.text for s in summaries))
        reporter.write_sep("=", f"{summaries[0].title} ({path})")
        reporter.write("".join(s.text for s in summaries))
