"""Every candidate Pod reporting the same wrong digest or device, round after round, fails the
start step at once (issue 22); a pending Pod, a passing one or a transient reason keeps the
deadline."""

from __future__ import annotations

from activities.warmup_unfixable import UnfixableWatch
from decisionmodel.engine.runtime_client import GateVerdict
from decisionmodel.errors import DeviceMismatch
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
