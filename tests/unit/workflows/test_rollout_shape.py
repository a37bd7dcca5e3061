"""The rollout workflow's module-level pieces and its shape, without Temporal.

The orchestration itself runs on the dev server (tests/integration/
test_rollout_workflow_logic.py) and against recorded histories (test_workflow_replay.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from temporalio.exceptions import ActivityError, ApplicationError, RetryState, TimeoutError

from decisionmodel.rollout.contracts import (
    DMRef,
    ResolveResult,
    RevisionRecord,
    RevisionSpec,
    RolloutInput,
)
from decisionmodel.vocabulary import PERMANENT_REASONS, Reason
from workflows.retry_policies import STEP as RETRY
from workflows.rollout import (
    RolloutFailure,
    _failure_of,
    _revision_objects,
    _unresolved_record,
)

WORKFLOWS = Path(__file__).resolve().parents[3] / "workflows"
LONGEST = 40  # lines, decorators excluded


def test_no_function_in_workflows_is_long() -> None:
    long = []
    for path in sorted(WORKFLOWS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LONGEST:
                    long.append(f"{path.name}:{node.lineno} {node.name}: {length} lines")
    assert long == [], "split these into steps of their own:\n" + "\n".join(long)


def test_retry_policy_lists_the_permanent_reasons_in_a_stable_order() -> None:
    assert RETRY.non_retryable_error_types == sorted(str(r) for r in PERMANENT_REASONS)


def activity_error(cause: BaseException, retry_state: RetryState | None) -> ActivityError:
    error = ActivityError(
        "activity failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="worker",
        activity_type="evaluate",
        activity_id="3",
        retry_state=retry_state,
    )
    error.__cause__ = cause
    return error


def failure(
    cause: BaseException, retry_state: RetryState | None, timeout: Reason | None
) -> tuple[str, str]:
    f = _failure_of(activity_error(cause, retry_state), "evaluate", timeout)
    assert isinstance(f, RolloutFailure)
    return f.reason, f.message


def test_a_typed_error_keeps_its_reason() -> None:
    cause = ApplicationError("no such model", type="ModelNotFound", non_retryable=True)
    assert failure(cause, RetryState.NON_RETRYABLE_FAILURE, Reason.EVALUATION_TIMEOUT) == (
        "ModelNotFound",
        "no such model",
    )


def test_retried_until_the_deadline_is_the_phase_timeout() -> None:
    cause = ApplicationError("dataset Secret not labelled", type="DatasetNotFound")
    assert failure(cause, RetryState.TIMEOUT, Reason.EVALUATION_TIMEOUT) == (
        "EvaluationTimeout",
        "evaluate did not succeed in time: dataset Secret not labelled",
    )
    # Without a phase deadline the last error is the reason.
    assert failure(cause, RetryState.TIMEOUT, None)[0] == "DatasetNotFound"


def test_an_untyped_error_is_activity_failed() -> None:
    assert failure(ApplicationError("boom"), RetryState.MAXIMUM_ATTEMPTS_REACHED, None) == (
        "ActivityFailed",
        "boom",
    )
    reason, message = failure(RuntimeError("odd"), None, None)
    assert (reason, message) == ("ActivityFailed", "evaluate failed: odd")


@pytest.mark.parametrize(
    ("timeout", "reason"),
    [(Reason.START_TIMEOUT, "StartTimeout"), (None, "ActivityTimeout")],
)
def test_a_timeout_names_the_phase_deadline_and_the_last_progress(
    timeout: Reason | None, reason: str
) -> None:
    cause = TimeoutError("timed out", type=None, last_heartbeat_details=["1/2 Pods ready"])
    assert failure(cause, RetryState.TIMEOUT, timeout) == (
        reason,
        "evaluate did not finish within its deadline; last progress: 1/2 Pods ready",
    )


def rollout_input() -> RolloutInput:
    return RolloutInput(
        dm=DMRef(namespace="ns", name="dm", uid="uid-1"),
        requested_revision="u000000000000001",
        revision=RevisionSpec(model="laya:en", digest=None, device="cuda"),
        replicas=3,
    )


def test_revision_objects_name_the_resolved_candidate() -> None:
    inp = rollout_input()
    record = RevisionRecord(hash="r0000000000000a", model="laya:en", digest="a" * 64)
    resolved = ResolveResult(
        record=record,
        canonical="ollaya.dev/library/laya:en",
        store_manifest_path="manifests/x",
        resolved_from_registry=True,
    )
    objects = _revision_objects(inp, resolved)
    assert objects.record is record and objects.revision == inp.revision
    assert (objects.store_manifest_path, objects.replicas) == ("manifests/x", 3)
    assert objects.caching_timeout_seconds == inp.timeouts.caching


def test_a_rollout_failed_before_resolve_records_the_requested_revision() -> None:
    failed = _unresolved_record(rollout_input())
    assert (failed.hash, failed.model, failed.digest, failed.device) == (
        "u000000000000001",
        "laya:en",
        "",
        "cuda",
    )
