"""Issue 34: Ready's observedGeneration is the current generation only once its spec serves, so
`kubectl wait --for=condition=Ready` (which takes an older observedGeneration as not met) waits
through a rollout and never returns 0 on a rollback or a hold."""

from __future__ import annotations

from typing import Any

from controller.reconciler.served import served_generations
from decisionmodel.api.status import DecisionModelStatus


def status(ready_generation: int | None, stable: bool = True) -> DecisionModelStatus:
    raw: dict[str, Any] = {"stableRevision": {"hash": "aaaa"}} if stable else {}
    if ready_generation is not None:
        raw["conditions"] = [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Serving",
                "message": "",
                "observedGeneration": ready_generation,
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            }
        ]
    return DecisionModelStatus.model_validate(raw)


def test_the_current_generation_once_its_spec_serves_or_when_nothing_serves() -> None:
    assert served_generations(status(4), 5, at_stable=True) == {}  # promoted, or in place
    assert served_generations(status(None, stable=False), 1, at_stable=False) == {}
    assert served_generations(None, 1, at_stable=False) == {}


def test_the_served_generation_while_the_spec_is_not_what_serves() -> None:
    # A rollout in flight, queued, held, rolled back or refused: the stable's generation stays.
    assert served_generations(status(4), 5, at_stable=False) == {"Ready": 4, "ModelReady": 4}
    assert served_generations(status(3), 6, at_stable=False)["Ready"] == 3


def test_never_the_current_generation_while_it_does_not_serve() -> None:
    # A Ready stamped with the current generation before this rule, an undo (the generation
    # does not change), or no Ready recorded: the generation before.
    assert served_generations(status(5), 5, at_stable=False) == {"Ready": 4, "ModelReady": 4}
    assert served_generations(status(None), 5, at_stable=False)["Ready"] == 4
    assert served_generations(status(None), 1, at_stable=False)["Ready"] == 0
