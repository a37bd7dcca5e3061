"""The fuzz wall (issue 12, item 8): fixtures and the counts printed at the end of the run.

`make fuzz` (DMROLLOUT_FULL=fuzz) generates 10,000 examples per target; without it (`make
test`) 200, derandomised, so the subset is the same every run. The counts go to the terminal
and to build/fuzz-counts.txt.
"""

from __future__ import annotations

import pytest
from fuzz_tally import Tally
from harness import run_summaries
from harness.run_summaries import Summary

TALLIES = pytest.StashKey[list[Tally]]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    tallies = session.config.stash.get(TALLIES, [])
    if tallies:
        text = "\n".join(t.summary() for t in tallies) + "\n"
        run_summaries.add(session.config, Summary("fuzz wall", text, "build/fuzz-counts.txt"))


@pytest.fixture
def tally(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Tally:
    found = Tally(request.node.name.removeprefix("test_fuzz_"))
    pytestconfig.stash.setdefault(TALLIES, []).append(found)
    return found
