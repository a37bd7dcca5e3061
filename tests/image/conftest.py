"""The image test is opt-in (``DMROLLOUT_FULL=image``: ``make image-test`` and ``.ci/run`` set it):
it needs the image built by ``make image`` (minutes), so a plain ``make test`` deselects it
rather than skip it."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.tiers import full

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if full("image"):
        return
    ours = [i for i in items if HERE in i.path.parents]
    if ours:
        config.hook.pytest_deselected(items=ours)
        items[:] = [i for i in items if HERE not in i.path.parents]
