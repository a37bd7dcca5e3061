"""Issue 13, point 3: the verbs against the local environment, as a user types them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml
from harness.helpers import eventually
from harness.rollout_harness import SIM_PREFIX, RolloutHarness, golden_jsonl, put_model

from controller.cli.errors import ExitCode
from localenv.paths import python_tool


def run(
    ctl: RolloutHarness, *args: str, kubeconfig: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DMROLLOUT_KUBECONFIG": str(kubeconfig or ctl.cluster.kubeconfig),
        "DMROLLOUT_TEMPORAL_TASK_QUEUE": ctl.task_queue,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def phase(ctl: RolloutHarness, name: str) -> str | None:
    found = ctl.status(name).get("phase")
    return str(found) if found else None


def context_kubeconfig(ctl: RolloutHarness, tmp_path: Path) -> Path:
    """The cluster's kubeconfig with the context's namespace set to the test's namespace."""
    config = yaml.safe_load(Path(ctl.cluster.kubeconfig).read_text())
    for c in config["contexts"]:
        c["context"]["namespace"] = ctl.namespace
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_get_status_and_not_found(ctl: RolloutHarness, tmp_path: Path) -> None:
    ctl.create_dm("listed", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "listed") == "Ready", 120, what="Ready")
    # No -n: the namespace comes from the kubeconfig context, as kubectl does.
    kubeconfig = context_kubeconfig(ctl, tmp_path)

    def listed() -> bool:
        got = run(ctl, "get", kubeconfig=kubeconfig)
        assert got.returncode == 0, got.stderr
        header, *rows = got.stdout.splitlines()
        assert header.split() == ["NAME", "MODEL", "PHASE", "READY", "REVISION", "AGE"]
        # READY is the steady state's count (status.replicas), written by the controller's
        # next reconcile after the promotion set the phase: it follows within one reconcile.
        return any(r.split()[:4] == ["listed", "laya:en", "Ready", "1/1"] for r in rows)

    await eventually(listed, 60, interval=1.0, what="the get row with 1/1 model-ready")
    every = run(ctl, "get", "-A", "-o", "json")
    assert any(
        r["namespace"] == ctl.namespace and r["name"] == "listed" for r in json.loads(every.stdout)
    )
    status = json.loads(run(ctl, "status", "listed", "-n", ctl.namespace, "-o", "json").stdout)
    assert status["phase"] == "Ready" and status["rollouts"] == []
    missing = run(ctl, "status", "nope", "-n", ctl.namespace)
    assert missing.returncode == ExitCode.NOT_FOUND
    assert missing.stderr.strip().splitlines() == [
        f"dmrollout: DecisionModel {ctl.namespace}/nope not found (`dmrollout get -n "
        f"{ctl.namespace}` lists them; -n or the kubeconfig context picks the namespace)"
    ]
    plugin = subprocess.run(
        [python_tool("kubectl"), "dm", "get", "listed", "-n", ctl.namespace, "-o", "yaml",
         "--kubeconfig", str(ctl.cluster.kubeconfig)],
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
             "DMROLLOUT_KUBECONFIG": str(ctl.cluster.kubeconfig)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert plugin.returncode == 0, plugin.stderr
    assert yaml.safe_load(plugin.stdout)[0]["phase"] == "Ready"


async def test_wait_retry_and_undo(ctl: RolloutHarness) -> None:
    put_model("laya", "undo2", accuracy=0.9, revision="undo2")
    ctl.create_dm("cycle", {"model": "laya:en"})
    first = run(ctl, "wait", "cycle", "-n", ctl.namespace, "--timeout", "180")
    assert first.returncode == 0, first.stderr
    assert "Ready: revision" in first.stdout
    old = ctl.status("cycle")["stableRevision"]

    ctl.update_spec("cycle", {"model": "laya:gone"})
    failed = run(ctl, "wait", "cycle", "-n", ctl.namespace, "--timeout", "180")
    assert failed.returncode == ExitCode.FAILED
    assert "RolledBack" in failed.stderr and "ModelNotFound" in failed.stderr
    token = ctl.status("cycle").get("lastRetryToken")
    retried = run(ctl, "retry", "cycle", "-n", ctl.namespace)
    assert retried.returncode == 0, retried.stderr
    await eventually(
        lambda: ctl.status("cycle").get("lastRetryToken") not in (None, token), 60, what="retried"
    )

    ctl.update_spec("cycle", {"model": "laya:undo2"})
    assert run(ctl, "wait", "cycle", "-n", ctl.namespace, "--timeout", "180").returncode == 0
    assert ctl.status("cycle")["stableRevision"]["model"] == "laya:undo2"
    undone = run(ctl, "undo", "cycle", "-n", ctl.namespace)
    assert undone.returncode == 0, undone.stderr
    # Seed 002's way back: the annotation names the revision; the spec is left to its owner.
    annotations = ctl.dm("cycle")["metadata"]["annotations"]
    assert annotations["decisionmodel.io/rollback-to"] == old["hash"]
    assert ctl.dm("cycle")["spec"]["model"] == "laya:undo2"
    back = run(ctl, "wait", "cycle", "-n", ctl.namespace, "--timeout", "180")
    assert back.returncode == 0, back.stderr
    stable = ctl.status("cycle")["stableRevision"]
    assert stable == old  # the whole recorded identity, hash and all


async def test_abort_then_wait_says_rolled_back(ctl: RolloutHarness) -> None:
    ctl.create_dm("stopped", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    await eventually(lambda: phase(ctl, "stopped") == "Ready", 120, what="Ready")
    ctl.update_spec("stopped", {"model": "laya:multilingual"})
    await eventually(lambda: phase(ctl, "stopped") == "AwaitingPromotion", 120, what="held")
    aborted = run(ctl, "abort", "stopped", "-n", ctl.namespace, "--reason", "wrong model")
    assert aborted.returncode == 0, aborted.stderr
    waited = run(ctl, "wait", "stopped", "-n", ctl.namespace, "--timeout", "120")
    assert waited.returncode == ExitCode.FAILED
    assert "Aborted" in waited.stderr and "wrong model" in waited.stderr
    nothing = run(ctl, "abort", "stopped", "-n", ctl.namespace)
    assert nothing.returncode == ExitCode.NOT_FOUND


async def test_wait_settles_on_a_held_approval_and_on_degraded(ctl: RolloutHarness) -> None:
    """Issue 22: `wait` returns on every phase where only a person can move things on, with
    its documented code, instead of running out its timeout."""
    ctl.create_dm("settle", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    assert run(ctl, "wait", "settle", "-n", ctl.namespace, "--timeout", "180").returncode == 0
    ctl.update_spec("settle", {"model": "laya:multilingual"})
    held = run(ctl, "wait", "settle", "-n", ctl.namespace, "--timeout", "180")
    assert held.returncode == ExitCode.HELD, held.stderr
    assert "AwaitingPromotion" in held.stderr and "dmrollout promote settle" in held.stderr
    ctl.update_spec("settle", {"model": "laya:en"})  # back to the stable: the candidate goes
    assert run(ctl, "wait", "settle", "-n", ctl.namespace, "--timeout", "180").returncode == 0

    stable = ctl.status("settle")["stableRevision"]["hash"]
    for pod in ctl.pods("settle", stable):
        ctl.kubectl("annotate", "pod", pod["metadata"]["name"], f"{SIM_PREFIX}lose-model=true")
    await eventually(lambda: phase(ctl, "settle") == "Degraded", 120, what="Degraded")
    degraded = run(ctl, "wait", "settle", "-n", ctl.namespace, "--timeout", "60")
    assert degraded.returncode == ExitCode.DEGRADED, degraded.stderr
    assert "Degraded: NoModelReadyPods" in degraded.stderr


async def test_wait_returns_on_a_guard_hold_with_its_reason(ctl: RolloutHarness) -> None:
    """Issue 34: a guard holding the rollout (here an unlabelled dataset Secret) waits for a
    person's fix, as an approval does: `wait` says so with its own code, the reason and the
    fix, instead of running out its timeout. A guard fixed just before `wait` is not one."""
    put_model("laya", "guarded", accuracy=0.95, revision="guarded")
    ctl.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "golden-held", "namespace": ctl.namespace},
            "stringData": {"cases.jsonl": golden_jsonl(10)},
        }
    )
    evaluation = {
        "datasetRef": {"secretRef": {"name": "golden-held", "key": "cases.jsonl"}},
        "minAccuracy": "0.50",
    }
    ctl.create_dm("guarded", {"model": "laya:en"})
    assert run(ctl, "wait", "guarded", "-n", ctl.namespace, "--timeout", "180").returncode == 0
    ctl.update_spec("guarded", {"model": "laya:guarded", "rollout": {"evaluation": evaluation}})
    start = time.monotonic()
    held = run(ctl, "wait", "guarded", "-n", ctl.namespace, "--timeout", "300", timeout=360)
    took = time.monotonic() - start
    assert held.returncode == ExitCode.BLOCKED, (held.returncode, held.stderr)
    assert "Evaluated" in held.stderr and "SecretNotAllowed" in held.stderr, held.stderr
    assert "decisionmodel.io/eval-dataset" in held.stderr, held.stderr  # the fix
    assert took < 150, took  # the candidate starts, the guard shows, the step tries again
    assert ctl.status("guarded")["phase"] == "Evaluating"

    ctl.kubectl("label", "secret", "golden-held", "decisionmodel.io/eval-dataset=true")
    # The step still shows the guard until its next attempt (within 30 s): not a hold.
    done = run(ctl, "wait", "guarded", "-n", ctl.namespace, "--timeout", "240", timeout=300)
    assert done.returncode == 0, done.stderr
    assert ctl.status("guarded")["stableRevision"]["model"] == "laya:guarded"


async def test_status_watch_in_a_terminal_shows_the_step(ctl: RolloutHarness) -> None:
    """As a person sees it: tmux runs `status --watch` during a rollout; the pane shows it."""
    ctl.create_dm("watched-cli", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    await eventually(lambda: phase(ctl, "watched-cli") == "Ready", 120, what="Ready")
    ctl.update_spec("watched-cli", {"model": "laya:multilingual"})
    session = f"dm-{ctl.namespace}"
    env = (
        f"DMROLLOUT_KUBECONFIG={ctl.cluster.kubeconfig} "
        f"DMROLLOUT_TEMPORAL_TASK_QUEUE={ctl.task_queue}"
    )
    command = (
        f"env {env} {sys.executable} -m controller.cli status watched-cli -n {ctl.namespace} -w"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", command],
        check=True, timeout=30, cwd=os.getcwd(),
    )  # fmt: skip
    try:

        def pane() -> str:
            return subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session],
                capture_output=True, text=True, timeout=30, check=True,
            ).stdout  # fmt: skip

        def showing_the_step() -> str | None:
            text = pane()
            return text if "awaiting promotion" in text and "step" in text else None

        shown = await eventually(showing_the_step, 120, what="the step in the pane")
        assert "AwaitingPromotion" in shown and "dmrollout promote watched-cli" in shown
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, timeout=30)
