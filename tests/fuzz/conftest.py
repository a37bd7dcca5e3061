"""The fuzz wall (issue 12, item 8): fixtures and the counts printed at the end of the run.

`make fuzz` (DMROLLOUT_FUZZ=full) generates 10,000 examples per target; without it (`make
test`) 200, derandomised, so the subset is the same every run. The counts go to the terminal
and to build/fuzz-counts.txt.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_tally import Tally, write

TALLIES = pytest.StashKey[list[Tally]]()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    tallies = config.stash.get(TALLIES, [])
    if not tallies:
        return
    path = write(tallies, Path(config.rootpath) / "build" / "fuzz-counts.txt")
    terminalreporter.write_sep("=", f"fuzz wall ({path})")
    terminalreporter.write("\n".join(t.summary() for t in tallies) + "\n")


@pytest.fixture
def tally(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Tally:
    found = Tally(request.node.name.removeprefix("test_fuzz_"))
    pytestconfig.stash.setdefault(TALLIES, []).append(found)
    return found
