"""Every candidate Pod reporting the same wrong digest or device (issue 22), or refusing every
load (issue 34), round after round, fails the start step at once; a pending Pod, a passing one
or a transient reason keeps the deadline."""

from __future__ import annotations

from activities.warmup_unfixable import UnfixableWatch
from decisionmodel.engine.runtime_client import LOAD_FAILED_CODE, GateVerdict, verdict
from decisionmodel.errors import DeviceMismatch, ModelLoadFailed, ProbeError
from decisionmodel.vocabulary import Reason

CPU = GateVerdict(
    ready=False, reason=Reason.DEVICE_MISMATCH, message="loaded on device 'cpu' but spec is cuda"
)
UNPINNED = GateVerdict(ready=False, reason=Reason.NOT_PINNED, message="expires_at set")


def test_every_pod_on_the_wrong_device_for_the_bounded_checks_fails_with_the_reason() -> None:
    watch = UnfixableWatch(checks=3)
    pods = ["a", "b"]
    assert watch.see(pods, {"a": CPU, "b": CPU}) is None
    assert watch.see(pods, {"a": CPU, "b": CPU}) is None
    failed = watch.see(pods, {"a": CPU, "b": CPU})
    assert isinstance(failed, DeviceMismatch) and failed.permanent
    assert "every candidate Pod (2) reported DeviceMismatch on 3 checks" in str(failed)
    assert "loaded on device 'cpu'" in str(failed)


def test_a_pod_still_pending_or_a_transient_reason_keeps_the_deadline() -> None:
    watch = UnfixableWatch(checks=2)
    for _ in range(5):  # b has no IP yet: not probed, so not judged
        assert watch.see(["a", "b"], {"a": CPU}) is None
    mixed = UnfixableWatch(checks=2)
    for i in range(5):
        assert mixed.see(["a"], {"a": CPU if i % 2 else UNPINNED}) is None


def test_a_replaced_pod_starts_its_count_afresh() -> None:
    watch = UnfixableWatch(checks=3)
    watch.see(["a"], {"a": CPU})
    watch.see(["a"], {"a": CPU})
    assert watch.see(["a2"], {"a2": CPU}) is None  # a went, a2 is new
    assert watch.see(["a2"], {"a2": CPU}) is None
    assert watch.see(["a2"], {"a2": CPU}) is not None


def test_a_runtime_that_refuses_every_load_fails_the_step_and_names_the_fix() -> None:
    """Issue 34: 500 MODEL_LOAD_FAILED on every Pod, round after round, held the Pods (GPUs
    among them) for the whole start deadline; it is as unfixable by waiting as a wrong device."""
    refused = verdict(
        "sha256:" + "a" * 64,
        "cpu",
        None,
        ProbeError(
            "warmup of m: the runtime failed to load it (500 MODEL_LOAD_FAILED: 'oom'); check "
            "spec.device against the node and the Pod's memory limit",
            status=500,
            code=LOAD_FAILED_CODE,
        ),
    )
    assert refused.load_failed and refused.reason == Reason.PROBE_ERROR
    watch = UnfixableWatch(checks=2)
    assert watch.see(["a", "b"], {"a": refused, "b": refused}) is None
    failed = watch.see(["a", "b"], {"a": refused, "b": refused})
    assert isinstance(failed, ModelLoadFailed) and failed.permanent
    assert "reported ModelLoadFailed on 2 checks" in str(failed)
    assert "memory limit" in str(failed)


def test_a_pod_that_did_not_answer_is_not_a_refused_load() -> None:
    silent = verdict("sha256:" + "a" * 64, "cpu", None, ProbeError("connect timeout"))
    assert not silent.load_failed
    watch = UnfixableWatch(checks=2)
    for _ in range(4):
        assert watch.see(["a"], {"a": silent}) is None
