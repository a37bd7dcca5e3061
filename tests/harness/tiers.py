"""The one opt-in of the long tiers: ``DMROLLOUT_FULL``, a comma-separated list of tiers to run
whole (``chaos``: every cell of the matrix; ``fuzz``: 10,000 examples per parser; ``image``: the
rollout from the built image, which ``make test`` leaves out; ``explore``: random lifecycles for
``EXPLORE_SECONDS``, where ``make test`` runs two fixed seeds). ``make chaos``, ``make fuzz`` and
``make image-test`` set it; ``.ci/run`` sets ``image``."""

from __future__ import annotations

import os
from typing import Final

LONG_TIERS: Final = frozenset({"chaos", "fuzz", "image", "explore"})


def full(tier: str) -> bool:
    """Whether ``DMROLLOUT_FULL`` asks for ``tier`` whole."""
    assert tier in LONG_TIERS, tier
    asked = {t.strip().lower() for t in os.environ.get("DMROLLOUT_FULL", "").split(",")}
    return tier in asked
