"""Temporal refusing the controller's credential (issue 34): an expired or revoked API key or
certificate (UNAUTHENTICATED), or an identity without the namespace (PERMISSION_DENIED), is
handled as an outage is (the steady state goes on, every DecisionModel says so) with a reason of
its own, the probe outlives whatever one probe raises, and a rotated key file is read again."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from controller.reconciler.reconcile import Reconciler, RolloutStep, temporal_condition
from controller.reconciler.settings import ControllerSettings
from controller.temporal.client import ApiKeyReload, TemporalSettings
from controller.temporal.errors import TemporalUnavailable, away_reason, is_away, refusal_reason
from controller.temporal.probe import TemporalProbe
from controller.temporal.rollouts import Rollouts
from decisionmodel.api import DecisionModel
from decisionmodel.rollout.contracts import DMRef
from decisionmodel.rollout.dispatch import DispatchSettings
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason

WHERE = "Temporal at t:7233 (namespace 'rollouts')"
LAZY_REFUSED = (
    "Failed client connect: `get_system_info` call error after connection: Status { code: "
    'Unauthenticated, message: "API key expired" }'
)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (RPCError("expired", RPCStatusCode.UNAUTHENTICATED, b""), Reason.TEMPORAL_UNAUTHORIZED),
        (
            RPCError("no access", RPCStatusCode.PERMISSION_DENIED, b""),
            Reason.TEMPORAL_PERMISSION_DENIED,
        ),
        (RuntimeError(LAZY_REFUSED), Reason.TEMPORAL_UNAUTHORIZED),
        (
            RPCError("received fatal alert: CertificateExpired", RPCStatusCode.UNAVAILABLE, b""),
            Reason.TEMPORAL_UNAUTHORIZED,
        ),
        (
            RPCError("tcp connect error", RPCStatusCode.UNAVAILABLE, b""),
            Reason.TEMPORAL_UNAVAILABLE,
        ),
        (RuntimeError("Failed client connect: tcp connect error"), Reason.TEMPORAL_UNAVAILABLE),
        (RPCError("timed out", RPCStatusCode.DEADLINE_EXCEEDED, b""), Reason.TEMPORAL_UNAVAILABLE),
        (RPCError("no such workflow", RPCStatusCode.NOT_FOUND, b""), None),
        (RPCError("bad query", RPCStatusCode.INVALID_ARGUMENT, b""), None),
        (ValueError("unauthenticated"), None),
    ],
    ids=[
        "unauthenticated",
        "permission-denied",
        "lazy-connect-refused",
        "certificate-refused",
        "unavailable",
        "lazy-connect-down",
        "timeout",
        "not-found",
        "invalid",
        "not-temporal",
    ],
)
def test_a_refused_credential_is_told_from_an_absence_and_from_an_answer(
    error: BaseException, reason: Reason | None
) -> None:
    assert away_reason(error) == reason
    assert is_away(error) == (reason is not None)
    refused = reason in (Reason.TEMPORAL_UNAUTHORIZED, Reason.TEMPORAL_PERMISSION_DENIED)
    assert (refusal_reason(error) is not None) == refused


class RefusingClient:
    """Every call refused with ``status``, as a frontend does for an expired key."""

    namespace = "rollouts"

    def __init__(self, status: RPCStatusCode = RPCStatusCode.UNAUTHENTICATED) -> None:
        self.status = status
        self.calls = 0
        self.api_key: str | None = "old-key"
        self.workflow_service = self

    def get_workflow_handle(self, wid: str) -> RefusingClient:
        return self

    async def describe(self, **kwargs: Any) -> Any:
        self.calls += 1
        raise RPCError("Request unauthorized.", self.status, b"")

    async def describe_namespace(self, request: Any, **kwargs: Any) -> Any:
        return await self.describe()


async def test_reachable_names_the_refusal_holds_it_and_tells_the_key_reload() -> None:
    client = RefusingClient()
    rollouts = Rollouts(client, "q", where=WHERE)  # type: ignore[arg-type]
    told: list[str] = []
    rollouts.on_refused = told.append
    with pytest.raises(TemporalUnavailable, match="refused the controller's credential") as e:
        await rollouts.describe_running("rollout/ns/dm/r")
    assert e.value.reason == Reason.TEMPORAL_UNAUTHORIZED
    assert WHERE in str(e.value)
    # Within the hold, the same answer at once, with the same reason.
    with pytest.raises(TemporalUnavailable) as again:
        await rollouts.describe_running("rollout/ns/dm/r")
    assert again.value.reason == Reason.TEMPORAL_UNAUTHORIZED
    assert client.calls == 1
    assert told == [Reason.TEMPORAL_UNAUTHORIZED]


def promoting() -> dict[str, Any]:
    """A DecisionModel whose status names a rollout run: its reconcile asks Temporal."""
    return {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {"model": "laya:en"},
        "status": {
            "phase": "Promoting",
            "rollout": {"workflowId": "rollout/ns/m/u1"},
            "candidateRevision": {"hash": "x", "model": "laya:en", "digest": "a" * 64},
        },
    }


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (RPCStatusCode.UNAUTHENTICATED, Reason.TEMPORAL_UNAUTHORIZED),
        (RPCStatusCode.PERMISSION_DENIED, Reason.TEMPORAL_PERMISSION_DENIED),
    ],
    ids=["unauthenticated", "permission-denied"],
)
async def test_a_refused_credential_still_reaches_the_steady_state(
    status: RPCStatusCode, reason: Reason
) -> None:
    """Before: the RPCError aborted the reconcile, and the stable was no longer looked after."""
    reconciler = Reconciler(
        kube=None,  # type: ignore[arg-type]
        rollouts=Rollouts(RefusingClient(status), "q", where=WHERE),  # type: ignore[arg-type]
        steady=None,  # type: ignore[arg-type]
        settings=ControllerSettings(leader_election=False),
        dispatch=DispatchSettings(),
        metrics=None,
    )
    steps: list[RolloutStep] = []

    async def steady(ref: DMRef, dm: DecisionModel, obj: Any, step: RolloutStep) -> None:
        steps.append(step)

    reconciler._steady = steady  # type: ignore[method-assign]
    obj = promoting()
    ref = DMRef(namespace="ns", name="m", uid="u1", generation=1)
    await reconciler._reconcile(ref, DecisionModel.from_k8s(obj), obj)
    [step] = steps
    assert step.temporal_reason == reason
    assert step.in_flight  # the rollout is left as it is, not taken for ended
    cond = temporal_condition(step, None)
    assert cond is not None
    assert (cond.type, cond.status, cond.reason) == (
        ConditionType.TEMPORAL_REACHABLE,
        ConditionStatus.FALSE,
        reason,
    )
    assert WHERE in cond.message
    fix = "rotate" if status == RPCStatusCode.UNAUTHENTICATED else "grant"
    assert fix in cond.message


class FlakyRollouts:
    """A probe's Rollouts whose client raises something new on each call."""

    def __init__(self, errors: list[BaseException]) -> None:
        self.errors = errors
        self.client = self
        self.workflow_service = self
        self.namespace = "rollouts"
        self.calls = 0

    @contextlib.asynccontextmanager
    async def reachable(self) -> Any:
        try:
            yield
        except RPCError as e:
            raise TemporalUnavailable(e.message, Reason.TEMPORAL_UNAUTHORIZED) from None

    async def describe_namespace(self, request: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return None


async def test_the_probe_loop_outlives_any_error_and_says_each_change() -> None:
    """Before: an RPCError other than "unreachable" ended the probe task, which nothing
    restarted, and idle DecisionModels kept their last condition."""
    rollouts = FlakyRollouts(
        [
            ValueError("a bug in one probe"),
            RPCError("key expired", RPCStatusCode.UNAUTHENTICATED, b""),
            RuntimeError("anything at all"),
        ]
    )
    changes: list[str | None] = []
    probe = TemporalProbe(rollouts, period=0.0)  # type: ignore[arg-type]
    probe.on_change = lambda: changes.append(probe.down and probe.reason)
    task = asyncio.create_task(probe.run())
    try:
        for _ in range(200):
            if rollouts.calls >= 5:
                break
            await asyncio.sleep(0)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert rollouts.calls >= 5  # the loop went on after each error
    # Down on the refusal, with its reason; up again once the calls answer.
    assert changes == [Reason.TEMPORAL_UNAUTHORIZED, None]
    assert probe.down is None
    assert probe.alive()


def test_a_probe_that_stopped_finishing_rounds_is_not_alive() -> None:
    probe = TemporalProbe(FlakyRollouts([]), period=15.0)  # type: ignore[arg-type]
    assert probe.alive(probe.last_round + 50)
    assert not probe.alive(probe.last_round + 60)


def test_a_rotated_key_file_is_read_again_when_the_key_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "api-key"
    key.write_text("old-key\n")
    settings = TemporalSettings(api_key_file=key)
    assert settings.current_api_key() == "old-key"
    assert settings.tls_config() is not False  # an API key implies TLS, from a file too
    client = RefusingClient()
    now = [100.0]
    reload = ApiKeyReload(settings, client, every=30.0, clock=lambda: now[0])  # type: ignore[arg-type]
    reload(Reason.TEMPORAL_UNAUTHORIZED)  # the same key: nothing to hand over
    assert client.api_key == "old-key"
    key.write_text("new-key\n")  # the Secret rotated, the kubelet updated the file
    now[0] += 10
    reload(Reason.TEMPORAL_UNAUTHORIZED)  # bounded: not read again within 30 s
    assert client.api_key == "old-key"
    reload(Reason.TEMPORAL_PERMISSION_DENIED)  # a new key would not grant a namespace
    now[0] += 25
    reload(Reason.TEMPORAL_UNAUTHORIZED)
    assert client.api_key == "new-key"


def test_a_key_from_the_environment_is_never_read_again() -> None:
    client = RefusingClient()
    reload = ApiKeyReload(TemporalSettings(api_key="env-key"), client)  # type: ignore[arg-type]
    reload(Reason.TEMPORAL_UNAUTHORIZED)
    assert client.api_key == "old-key"


def test_a_renewed_certificate_while_refused_makes_the_controller_unhealthy(
    tmp_path: Path,
) -> None:
    """The SDK keeps the TLS material it connected with: a renewed client certificate is taken
    by a new process, so /healthz fails (the kubelet restarts it) only while Temporal refuses
    the credential and the mounted certificate differs from the one the process started with."""
    from controller.reconciler.manager import Manager
    from decisionmodel.rollout.settings import RolloutSettings

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("expired cert")
    key.write_text("key")
    manager = Manager(
        ControllerSettings(leader_election=False),
        RolloutSettings(),
        TemporalSettings(client_cert_file=cert, client_key_file=key),
    )
    probe = TemporalProbe(FlakyRollouts([]))  # type: ignore[arg-type]
    manager.probe = probe
    assert manager._healthy()
    probe.down, probe.reason = "refused", Reason.TEMPORAL_UNAUTHORIZED
    assert manager._healthy()  # refused, but nothing new to connect with
    cert.write_text("renewed cert")
    assert not manager._healthy()
    probe.reason = Reason.TEMPORAL_PERMISSION_DENIED  # a certificate would not grant it
    assert manager._healthy()
    probe.down = None
    assert manager._healthy()
