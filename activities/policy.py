"""The live DecisionModel's policy, read by evaluate and promote right before they act.

The comparison itself is pure (``decisionmodel.rollout.policy_check``); this module only reads the
object (UID-checked: a re-created namesake is DecisionModelGone) and maps it to a policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from decisionmodel.api import DecisionModel, DecisionModelInvalid
from decisionmodel.errors import PolicyMismatch
from decisionmodel.evaluation.ledger import LedgerEntry
from decisionmodel.rollout.contracts import DMRef, RolloutPolicy
from decisionmodel.rollout.spec_mapping import rollout_policy
from kube.client import Kube
from kube.rollout_status import ledger_of


@dataclass(frozen=True)
class LivePolicy:
    policy: RolloutPolicy
    stable: str | None  # status.stableRevision.hash now
    previous: str | None = None  # status.previousRevision.hash: what served before the stable
    # status.evaluationLedger: each recent revision's sequential test, continued by evaluate.
    ledger: list[LedgerEntry] = field(default_factory=list)


async def read_live_policy(kube: Kube, dm: DMRef) -> LivePolicy:
    obj = await Kube.run(kube.get_dm, dm)
    try:
        live = DecisionModel.from_k8s(obj)
    except DecisionModelInvalid as err:
        # The controller refuses such an object too; nothing may be promoted under it.
        raise PolicyMismatch(
            f"the live DecisionModel cannot be read as a policy ({err}); fix the named "
            "fields, then retry the rollout (annotation decisionmodel.io/retry)"
        ) from None
    stable = live.status.stable_revision if live.status else None
    previous = live.status.previous_revision if live.status else None
    return LivePolicy(
        rollout_policy(live),
        stable.hash if stable else None,
        previous.hash if previous else None,
        ledger_of(obj.get("status") or {}),
    )
