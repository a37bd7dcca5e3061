"""The policy re-check at the point of use: a rollout evaluates and promotes only under the live
DecisionModel's policy, never under the one its workflow input claims.

The workflow input is written by whoever starts the workflow: the controller, or anyone who may
start workflows in the Temporal namespace (docs/security.md). So before evaluating and before
promoting, the activities read the live DecisionModel and compare:

- the **policy digest** (``RolloutPolicy.digest``: evaluation dataset reference, gates, case
  count, promotion mode) of what this rollout enforces, taken from its own input, with the live
  spec's. A digest the starter merely declares would prove nothing, so none is trusted;
- before promoting, the **approval**: when the live spec says ``promotion: Manual`` and another
  revision is stable, the rollout must have accepted the approval bound to this candidate and
  to the live gates (``approval_token``); a rollout that awaited none (started with another
  promotion mode, or without the stable) is refused.

A refusal is ``PolicyMismatch``, permanent: the workflow rolls the candidate back and the stable
keeps serving. Pure functions; the activities do the reading (``activities/policy.py``).
"""

from __future__ import annotations

from decisionmodel.errors import PolicyMismatch
from decisionmodel.rollout.contracts import (
    DMRef,
    EvaluateInput,
    PromoteInput,
    RolloutPolicy,
    approval_token,
)

RETRY_HINT = 'kubectl annotate dm {name} decisionmodel.io/retry="$(date +%s)" --overwrite'


def describe(policy: RolloutPolicy | None) -> str:
    """The policy in a message: names and thresholds only (a dataset is named, never read)."""
    if policy is None:
        return "no policy (an input from before the check)"
    what = f"promotion {policy.promotion}"
    ev = policy.evaluation
    if ev is None:
        return f"{what}, no evaluation [policy {policy.digest()}]"
    gates = ", ".join(f"{k} {v}" for k, v in sorted(ev.gates().items()))
    where = f"{ev.dataset.kind} {ev.dataset.name}/{ev.dataset.key}"
    cases = f"≤{ev.max_cases} cases"
    return f"{what}, evaluation {gates} on {where} ({cases}) [policy {policy.digest()}]"


def _refusal(dm: DMRef, step: str, why: str) -> PolicyMismatch:
    return PolicyMismatch(
        f"{step} refused: {why}. A rollout is evaluated and promoted only under the "
        f"DecisionModel's current spec.rollout; the stable revision keeps serving. The "
        "controller replaces a rollout whose policy changed by itself; a rollout refused here "
        "(started by hand, or the policy changed at this very moment) is rolled back: roll the "
        f"revision out again under the current policy with: {RETRY_HINT.format(name=dm.name)}"
    )


def policy_problem(run: RolloutPolicy | None, live: RolloutPolicy) -> str | None:
    """Why a rollout enforcing ``run`` may not go on under ``live``, or None."""
    if run is not None and run.digest() == live.digest():
        return None
    return f"this rollout enforces {describe(run)} but the DecisionModel asks for {describe(live)}"


def check_evaluation(inp: EvaluateInput, live: RolloutPolicy) -> None:
    """Before evaluating: the gates, dataset and (when the input carries it) the promotion mode
    are the live spec's. An input scheduled before the check carries no promotion mode: its
    evaluation part is compared alone, and promote compares the rest."""
    run = RolloutPolicy(evaluation=inp.policy, promotion=inp.promotion or live.promotion)
    why = policy_problem(run, live)
    if why is not None:
        raise _refusal(inp.dm, "evaluation", why)


def check_promotion(inp: PromoteInput, live: RolloutPolicy, live_stable: str | None) -> None:
    """Before promoting: the whole policy, then the approval the live policy requires.

    ``live_stable`` is the stable revision's hash as status records it now. When it is the
    candidate, the promotion is already recorded (a retried attempt): it must be finished, not
    refused, so the caller does not check then.
    """
    why = policy_problem(inp.policy, live)
    if why is not None:
        raise _refusal(inp.dm, "promotion", why)
    if live.promotion != "Manual" or live_stable is None:
        return  # no approval required (the first revision of a DecisionModel is never held)
    dataset = inp.dataset_digest if live.evaluation is not None else None
    expected = approval_token(inp.candidate.hash, live.evaluation, dataset)
    if inp.approval is None:
        why = (
            f"promotion Manual requires an approval of candidate {inp.candidate.hash} while "
            f"revision {live_stable} is stable, and this rollout accepted none"
        )
        raise _refusal(inp.dm, "promotion", why)
    if inp.approval != expected:
        why = (
            f"the approval this rollout accepted is not the one bound to candidate "
            f"{inp.candidate.hash} and the current gates ({expected!r})"
        )
        raise _refusal(inp.dm, "promotion", why)
