"""The image test is opt-in (``make image-test`` sets DMROLLOUT_IMAGE_TEST=1): it needs the
image built by ``make image`` (minutes), so ``make test`` deselects it rather than skip it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DMROLLOUT_IMAGE_TEST") == "1":
        return
    ours = [i for i in items if HERE in i.path.parents]
    if ours:
        config.hook.pytest_deselected(items=ours)
        items[:] = [i for i in items if HERE not in i.path.parents]
