"""One vocabulary: every reason and condition type the product writes is spelled in
``decisionmodel.vocabulary`` and nowhere else, and the permanent set is one set."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from decisionmodel import errors
from decisionmodel.vocabulary import (
    PERMANENT_REASONS,
    WORKFLOW_VERDICTS,
    ConditionStatus,
    ConditionType,
    Device,
    Engine,
    EvaluationResult,
    EventReason,
    Phase,
    Reason,
    RolloutResult,
    StatusKey,
)

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("decisionmodel", "kube", "activities", "workflows", "controller")
VOCABULARY = ROOT / "decisionmodel" / "vocabulary.py"
VOCABULARIES = (
    Phase,
    ConditionType,
    Reason,
    EventReason,
    EvaluationResult,
    RolloutResult,
    ConditionStatus,
    Device,
    Engine,
    StatusKey,
)


def _product_files() -> list[Path]:
    return sorted(p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py") if p != VOCABULARY)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


# Words of the vocabulary used for something else, each with why.
NOT_OURS = {
    # kubectl get dm's READY printer column (model-ready replicas), not the condition.
    ("decisionmodel/api/crd.py", "Ready"),
    # Kubernetes resource names (requests and limits), not the device class.
    ("decisionmodel/engine/sizing.py", "cpu"),
    ("decisionmodel/engine/render/prefetch_job.py", "cpu"),
    # The runtime's container, command and app label, not the engine's name in the API.
    ("decisionmodel/engine/render/deployment.py", "ollaya"),
    ("decisionmodel/engine/render/labels.py", "ollaya"),
    # A condition's own observedGeneration, not the DecisionModel's.
    ("kube/rollout_status.py", "observedGeneration"),
}
# Too common a word to scan for: a Pod's status.phase and the metrics' ``phase`` label say it
# too; "rollout" is in workflow IDs and prose. StatusKey names the DecisionModel's fields.
AMBIGUOUS = {StatusKey.PHASE, StatusKey.ROLLOUT}
WORDS = {str(m) for e in VOCABULARIES for m in e if m not in AMBIGUOUS}


def literal_words(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    where = str(path.relative_to(ROOT))
    return [
        f"{where}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in WORDS
        and id(node) not in skip
        and (where, node.value) not in NOT_OURS
    ]


def test_no_reason_or_condition_literal_outside_the_vocabulary() -> None:
    found = [hit for path in _product_files() for hit in literal_words(path)]
    assert found == [], "spell these through decisionmodel.vocabulary:\n" + "\n".join(found)


def test_the_scan_finds_a_literal() -> None:
    # The test above must be able to fail: a reason spelled out is found.
    tree_text = 'x = "DigestMismatch"\n'
    probe = ROOT / "build" / "vocabulary_probe.py"
    probe.parent.mkdir(exist_ok=True)
    probe.write_text(tree_text)
    try:
        assert literal_words(probe) == ["build/vocabulary_probe.py:1: 'DigestMismatch'"]
    finally:
        probe.unlink()


def _error_classes() -> list[type[errors.DmrolloutError]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.DmrolloutError) and cls is not errors.DmrolloutError
    ]


def test_every_error_class_is_listed_and_speaks_the_vocabulary() -> None:
    classes = _error_classes()
    assert set(errors.ALL_ERRORS) == set(classes)
    for cls in classes:
        assert cls.reason in set(Reason), f"{cls.__name__}.reason {cls.reason!r}"


def test_permanent_set_is_the_permanent_error_classes() -> None:
    raised_permanent = {
        cls.reason
        for cls in _error_classes()
        if cls.permanent and cls.reason not in WORKFLOW_VERDICTS
    }
    # Raised non-retryable outside the DmrolloutError classes (activities.typed_errors).
    raised_permanent.add(Reason.DECISION_MODEL_GONE)
    assert set(PERMANENT_REASONS) == raised_permanent


@pytest.mark.parametrize("reason", sorted(PERMANENT_REASONS))
def test_workflow_retry_policy_never_retries_a_permanent_reason(reason: str) -> None:
    from workflows.retry_policies import STEP as RETRY

    assert reason in (RETRY.non_retryable_error_types or [])


def test_workflow_retry_policy_lists_only_permanent_reasons() -> None:
    from workflows.retry_policies import STEP as RETRY

    assert set(RETRY.non_retryable_error_types or []) == {str(r) for r in PERMANENT_REASONS}
