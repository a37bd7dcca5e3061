"""A backstop for a test that outlives its own timeout: stacks dumped, the worker ended.

pytest-timeout's ``signal`` method raises inside the test, which is what a stuck test needs
almost always. It cannot end a test whose main thread never returns to Python (a blocking call
in native code) or whose teardown blocks again after the timeout's exception; CI then waits
for the whole run's deadline and says nothing of which test (stop 42's CI: one xdist worker
silent for an hour, no failure printed). This timer, ``GRACE`` after the test's own limit, dumps
every thread's stack to stderr with the test's id and ends the worker process: xdist reports
the test as crashed and carries on with a new worker, so the run ends with a named failure.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
from collections.abc import Generator
from typing import Final

import pytest

# Overridable only so that the backstop's own test need not wait five minutes.
GRACE: Final = float(os.environ.get("DMROLLOUT_TEST_BACKSTOP_GRACE", "300"))
EXIT_CODE: Final = 3


def limit_of(item: pytest.Item) -> float | None:
    """The test's pytest-timeout limit: its ``timeout`` marker, else the ini value."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    value = item.config.getini("timeout")
    return float(value) if value else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    limit = limit_of(item)
    timer = None
    if limit:
        timer = threading.Timer(limit + GRACE, give_up, args=(item, limit))
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


def give_up(item: pytest.Item, limit: float) -> None:
    # The test's output is captured (at the file descriptors): let this reach the terminal.
    capture = item.config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    sys.stderr.write(
        f"\n+++ backstop: {item.nodeid} still runs {GRACE:.0f} s after its {limit:.0f} s timeout; "
        "every thread's stack follows, then this worker ends +++\n"
    )
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()
    os._exit(EXIT_CODE)
