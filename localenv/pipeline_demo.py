"""``make demo-pipeline``: one model promoted through two clusters (issue 25).

Two real control planes in this network namespace (``hub``, which is also the staging stage,
and ``prod``), one Temporal dev server with a namespace per cluster's rollouts and one for the
pipelines, the simulators, and per cluster a ``dmrollout worker`` and ``dmrollout controller``
(the same commands a cluster runs; each worker polls its cluster's stage queue), plus the hub's
``dmrollout pipeline-controller``. Then:

1. a DecisionModelPipeline ``scoring`` with ``staging`` (hub) → ``prod`` (soak, Manual);
2. staging promotes; prod soaks, then waits for its approval;
3. an approval for other bytes is refused; ``dmrollout pipeline promote`` approves the freight;
4. prod promotes the digest staging verified;
5. with ``--scenarios``: a new revision whose tag is re-published while prod soaks (prod waits
   for the bytes staging verified, never taking the new ones, and rolls them out once they
   are re-published), and one whose model fails its evaluation
   in staging (it rolls back there; prod never gets it: Blocked).

``--json FILE`` writes what was observed (the e2e test reads it); each wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import httpx

from decisionmodel.api.crd import CRD_NAME
from decisionmodel.api.pipeline_crd import PIPELINE_CRD_FILE, PIPELINE_CRD_NAME
from localenv.cluster import LocalCluster
from localenv.multicluster import MultiClusterEnv
from localenv.paths import REPO_ROOT
from localenv.processes import ManagedProcess
from simulators.answers import make_golden_set

NAMESPACE: Final = "models"
PIPELINE: Final = "scoring"
PIPELINES_NS: Final = "pipelines"
ROLLOUT_NS: Final = {"hub": "default", "prod": "prod"}
STAGE_CLUSTER: Final = {"hub": "staging", "prod": "prod"}
CRD: Final = REPO_ROOT / "deploy" / "crd" / "decisionmodels.decisionmodel.io.yaml"
GOLDEN: Final = {"name": "scoring-golden", "key": "cases.jsonl"}
SOAK: Final = "20s"


def rollout_namespace(cluster: str) -> str:
    """Each cluster's rollouts in a Temporal namespace of their own (the hub's: default)."""
    return ROLLOUT_NS.get(cluster, cluster)


def say(text: str) -> None:
    print(f"==> {text}", flush=True)


def product_env(env: MultiClusterEnv, name: str, index: int) -> dict[str, str]:
    registry = f"http://127.0.0.1:{env.ports.registry}"
    out = {
        "DMROLLOUT_KUBECONFIG": str(env.clusters[name].kubeconfig),
        "DMROLLOUT_OLLAYA_REGISTRY": registry,
        "DMROLLOUT_ALLOWED_REGISTRIES": json.dumps([f"127.0.0.1:{env.ports.registry}"]),
        "DMROLLOUT_ALLOW_INSECURE_REGISTRIES": "true",
        "DMROLLOUT_TEMPORAL_ADDRESS": env.temporal.address,
        "DMROLLOUT_TEMPORAL_NAMESPACE": rollout_namespace(name),
        "DMROLLOUT_TEMPORAL_PIPELINES_NAMESPACE": PIPELINES_NS,
        "DMROLLOUT_STAGE_CLUSTER": STAGE_CLUSTER.get(name, name),
        "DMROLLOUT_CONTROLLER_LEASE_NAMESPACE": "default",
        "DMROLLOUT_CONTROLLER_HEALTH_PORT": str(8080 + 100 * index),
        "DMROLLOUT_WORKER_METRICS_PORT": str(8081 + 100 * index),
        "DMROLLOUT_METRICS_SECURE": "false",
        "DMROLLOUT_POLL_INTERVAL_SECONDS": "0.5",
    }
    if name == "hub":
        out["DMROLLOUT_PIPELINE_HUB"] = "true"
    return out


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"pipeline demo: {what} did not happen within {timeout:.0f} s")
        time.sleep(0.5)


def get_json(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    r = cluster.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else {}


class Demo:
    def __init__(self, env: MultiClusterEnv, state: Path, pipeline: str = PIPELINE) -> None:
        self.env = env
        self.name = pipeline  # the DecisionModelPipeline (and the DecisionModel) it follows
        self.state = state
        self.hub = env.clusters["hub"]
        # The first cluster after the hub (``prod`` here; the fan-out has two).
        self.prod = next(c for n, c in env.clusters.items() if n != "hub")
        self.cli_env = {**os.environ, **product_env(env, "hub", 0)}
        self.processes: dict[str, ManagedProcess] = {}

    def install(self) -> None:
        for index, (name, cluster) in enumerate(self.env.clusters.items()):
            cluster.establish_crd(CRD, CRD_NAME)
            cluster.kubectl("create", "namespace", NAMESPACE, check=False)
            golden = "".join(json.dumps(c) + "\n" for c in make_golden_set(100, seed=2026))
            cluster.apply(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": GOLDEN["name"], "namespace": NAMESPACE},
                    "data": {GOLDEN["key"]: golden},
                }
            )
            self._start(name, index)
        self.hub.establish_crd(REPO_ROOT / PIPELINE_CRD_FILE, PIPELINE_CRD_NAME)
        self._spawn("hub-pipeline-controller", ["pipeline-controller"], self.cli_env)
        say(f"workers, controllers and the pipeline controller started (logs: {self.state})")

    def _start(self, name: str, index: int) -> None:
        penv = {**os.environ, **product_env(self.env, name, index)}
        self._spawn(f"{name}-worker", ["worker"], penv)
        self._spawn(f"{name}-controller", ["controller"], penv)

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> ManagedProcess:
        cmd = [sys.executable, "-m", "controller.cli", *args]
        proc = ManagedProcess(name, cmd, self.state / "logs", env=env).start()
        self.env.extra_processes.append(proc)
        self.processes[name] = proc
        return proc

    def revive(self) -> None:
        """As the kubelet does (restartPolicy Always): a product process that exited (a
        controller that lost its lease while its API server was away exits on purpose, so that
        a standby takes over) is started again."""
        for name, proc in list(self.processes.items()):
            if not proc.running():
                say(f"{name} exited; starting it again")
                self.env.extra_processes.remove(proc)
                self._spawn(name, proc.args[3:], proc.env or {})

    def restart(self, name: str) -> None:
        """SIGKILL a process (a crash) and start it again as it was."""
        proc = self.processes[name]
        proc.kill()
        self.env.extra_processes.remove(proc)
        args = proc.args[3:]  # after python -m controller.cli
        self._spawn(name, args, proc.env or {})

    def rollout_runs(self, revision_of: str) -> int:
        """RolloutWorkflow runs in prod's namespace whose ID names this rollout."""
        out = subprocess.run(
            [
                sys.executable, "-m", "controller.cli", "history", PIPELINE, "-n", NAMESPACE,
                "--kubeconfig", str(self.prod.kubeconfig), "--temporal-namespace", "prod",
                "-o", "json",
            ],
            env=self.cli_env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        rows = json.loads(out.stdout or "[]")
        return sum(1 for r in rows if str(r.get("workflowId", "")).startswith(revision_of))

    def put_model(self, tag: str, **profile: Any) -> str:
        url = f"http://127.0.0.1:{self.env.ports.registry}/_sim/models/library/laya/{tag}"
        with httpx.Client(trust_env=False, timeout=10) as http:
            r = http.put(url, json=profile)
            r.raise_for_status()
            return str(r.json()["digest"])

    def apply_pipeline(
        self,
        model: str,
        evaluation: bool,
        approval: str = "Manual",
        soak: str = SOAK,
        promotion: str | None = None,
    ) -> None:
        template: dict[str, Any] = {"model": model, "replicas": 1}
        if promotion:
            template["rollout"] = {"promotion": promotion}
        if evaluation:
            template["rollout"] = {
                "evaluation": {"datasetRef": {"configMapRef": GOLDEN}, "minAccuracy": "0.85"}
            }
        stages = [
            {"name": "staging", "cluster": STAGE_CLUSTER["hub"], "namespace": NAMESPACE},
            {
                "name": "prod",
                "cluster": STAGE_CLUSTER["prod"],
                "namespace": NAMESPACE,
                "dependsOn": ["staging"],
                "soak": soak,
                "approval": approval,
            },
        ]
        self.hub.apply(
            {
                "apiVersion": "decisionmodel.io/v1alpha1",
                "kind": "DecisionModelPipeline",
                "metadata": {"name": PIPELINE, "namespace": NAMESPACE},
                "spec": {"template": {"spec": template}, "stages": stages},
            }
        )

    def pipeline(self) -> dict[str, Any]:
        return get_json(self.hub, "dmp", self.name, "-n", NAMESPACE).get("status") or {}

    def stage(self, name: str) -> dict[str, Any]:
        return next((s for s in self.pipeline().get("stages") or [] if s["name"] == name), {})

    def await_run(self, before: str | None, model: str, timeout: float = 120) -> None:
        """The new revision's run has written its own status (its freight): stages read from
        then on are that run's. The controller names the new revision first, while the
        stages shown are still the last run's (seen on CI: a wait for staging Promoted
        returned at once on the previous run's, before the new run had begun)."""

        def written() -> bool:
            status = self.pipeline()
            freight = status.get("freight") or {}
            return status.get("revision") not in (None, before) and freight.get("model") == model

        wait_for(written, timeout, f"the run of {model}")

    def stage_in(self, name: str, *states: str, timeout: float = 300) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            self.revive()
            s = self.stage(name)
            return s if s and s.get("state") in states else None

        found: dict[str, Any] = wait_for(
            reached,
            timeout,
            f"stage {name} {'/'.join(states)}",
        )
        return found

    def dm_status(self, cluster: LocalCluster) -> dict[str, Any]:
        return get_json(cluster, "dm", self.name, "-n", NAMESPACE).get("status") or {}

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "controller.cli", "pipeline", *args, "-n", NAMESPACE]
        kube = ["--kubeconfig", str(self.hub.kubeconfig)]
        return subprocess.run(
            [*cmd, *kube], env=self.cli_env, capture_output=True, text=True, timeout=60
        )


def promote_through(demo: Demo) -> dict[str, Any]:
    """Staging → soak → approval (a wrong one refused) → prod."""
    digest = demo.put_model("en", revision="en-1", accuracy=0.92)
    demo.apply_pipeline("laya:en", evaluation=False)
    say("applied DecisionModelPipeline scoring: staging (hub) -> prod (soak 20s, Manual)")
    staged = demo.stage_in("staging", "Promoted", "Failed")
    say(f"staging: {staged['state']} ({staged.get('reason')})")
    waiting = demo.stage_in("prod", "AwaitingApproval", "Failed", "Blocked")
    other = "f" * 64
    wrong = demo.cli("promote", PIPELINE, "--stage", "prod", "--digest", other)
    approved = demo.cli("promote", PIPELINE, "--stage", "prod")
    say(f"approval for other bytes: exit {wrong.returncode}")
    say(f"approval for the freight: {approved.stdout.strip() or approved.stderr.strip()}")
    done = demo.stage_in("prod", "Promoted", "Failed", timeout=300)
    print(demo.hub.kubectl("get", "dmp", "-n", NAMESPACE, "-o", "wide").stdout, flush=True)
    pipeline = demo.pipeline()
    return {
        "registry_digest": digest,
        "freight": (pipeline.get("freight") or {}).get("digest"),
        "staging": staged,
        "prod_waiting": waiting,
        "prod": done,
        "wrong_approval_exit": wrong.returncode,
        "wrong_approval_error": wrong.stderr.strip()[-400:],
        "approval_exit": approved.returncode,
        "staging_stable": (demo.dm_status(demo.hub).get("stableRevision") or {}).get("digest"),
        "prod_stable": (demo.dm_status(demo.prod).get("stableRevision") or {}).get("digest"),
        "phase": pipeline.get("phase"),
        "workflow_id": pipeline.get("workflowId"),
        "history": demo.cli("history", PIPELINE).stdout,
    }


def tag_moved(demo: Demo) -> dict[str, Any]:
    """A new revision (laya:v2): staging promotes it, then the tag is re-published with other
    bytes; prod waits for the bytes staging verified (FreightNotServed), applying nothing,
    and rolls out exactly them once they are re-published under the tag."""
    verified = demo.put_model("v2", revision="v2-1", accuracy=0.93)
    before = demo.pipeline().get("revision")
    demo.apply_pipeline("laya:v2", evaluation=False)
    demo.await_run(before, "laya:v2")
    staged = demo.stage_in("staging", "Promoted", "Failed", timeout=400)
    prod_before = get_json(demo.prod, "dm", PIPELINE, "-n", NAMESPACE)
    moved = demo.put_model("v2", revision="v2-2-moved", accuracy=0.93)
    say("the tag laya:v2 was re-published with other bytes while prod soaked")
    demo.stage_in("prod", "AwaitingApproval", "Failed", "Blocked")
    demo.cli("promote", PIPELINE, "--stage", "prod")
    held = wait_for(
        lambda: (s := demo.stage("prod")).get("reason") == "FreightNotServed" and s,
        120,
        "prod waiting for the verified bytes",
    )
    say(f"prod: {held['state']} ({held['reason']}: {held.get('message', '')[:160]})")
    prod_held = get_json(demo.prod, "dm", PIPELINE, "-n", NAMESPACE)
    republished = demo.put_model("v2", revision="v2-1", accuracy=0.93)
    say("the verified bytes were re-published under laya:v2")
    prod = demo.stage_in("prod", "Promoted", "Failed", timeout=400)
    say(f"prod: {prod['state']} ({prod.get('reason')}: {prod.get('message', '')[:160]})")
    prod_dm = get_json(demo.prod, "dm", PIPELINE, "-n", NAMESPACE)
    return {
        "verified_digest": verified,
        "moved_digest": moved,
        "republished_digest": republished,
        "freight": (demo.pipeline().get("freight") or {}).get("digest"),
        "staging": staged,
        "held": held,
        # The prod DecisionModel while held: untouched (the spec it had before the run).
        "prod_generation_before": (prod_before.get("metadata") or {}).get("generation"),
        "prod_generation_held": (prod_held.get("metadata") or {}).get("generation"),
        "prod": prod,
        "prod_spec_digest": prod_dm["spec"].get("digest"),
        "prod_stable": ((prod_dm.get("status") or {}).get("stableRevision") or {}).get("digest"),
    }


def failing_candidate(demo: Demo) -> dict[str, Any]:
    """A revision whose model fails its evaluation in staging never reaches prod."""
    demo.put_model("weak", revision="weak-1", accuracy=0.4)
    before = demo.pipeline().get("revision")
    demo.apply_pipeline("laya:weak", evaluation=True)
    demo.await_run(before, "laya:weak")
    staged = demo.stage_in("staging", "Failed", "Promoted", timeout=400)
    prod = demo.stage_in("prod", "Blocked", "AwaitingApproval", "Promoted", timeout=60)
    return {
        "staging": staged,
        "prod": prod,
        "prod_model": (demo.dm_status(demo.prod).get("stableRevision") or {}).get("model"),
        "prod_spec_model": get_json(demo.prod, "dm", PIPELINE, "-n", NAMESPACE)["spec"]["model"],
    }


def partition(demo: Demo) -> dict[str, Any]:
    """Prod's API server away for 60 s while its stage runs, then prod's worker killed while
    the stage still runs: the stage waits, then completes, with one rollout in prod."""
    demo.put_model("v3", revision="v3-1", accuracy=0.93)
    before = demo.pipeline().get("revision")
    demo.apply_pipeline("laya:v3", evaluation=False)
    demo.await_run(before, "laya:v3")
    demo.stage_in("prod", "AwaitingApproval", "Failed", "Blocked", timeout=400)
    demo.cli("promote", PIPELINE, "--stage", "prod")
    demo.stage_in("prod", "RollingOut")
    demo.prod.stop_apiserver()
    say("prod's API server stopped for 60 s")
    time.sleep(60)  # the fault's length, not a synchronisation
    during = demo.stage("prod")
    demo.prod.start_apiserver()
    demo.restart("prod-worker")
    say("prod's API server back; prod's worker killed and started again")
    prod = demo.stage_in("prod", "Promoted", "Failed", timeout=400)
    rollout = str(prod.get("rolloutWorkflowId") or "")
    return {
        "during": during,
        "prod": prod,
        "prod_model": (demo.dm_status(demo.prod).get("stableRevision") or {}).get("model"),
        "rollout_runs": demo.rollout_runs(rollout) if rollout else 0,
    }


def abort_in_flight(demo: Demo) -> dict[str, Any]:
    """`dmrollout pipeline abort` while staging's rollout waits (its template asks for a
    manual promotion in the cluster): the rollout is aborted in the hub's own namespace and
    rolls back; staging's stable keeps serving; prod never starts."""
    serving = (demo.dm_status(demo.hub).get("stableRevision") or {}).get("model")
    demo.put_model("v5", revision="v5-1", accuracy=0.93)
    before = demo.pipeline().get("revision")
    demo.apply_pipeline("laya:v5", evaluation=False, promotion="Manual")
    demo.await_run(before, "laya:v5")
    wait_for(
        lambda: demo.dm_status(demo.hub).get("phase") == "AwaitingPromotion",
        300,
        "staging's rollout awaiting its promotion",
    )
    aborted = demo.cli("abort", PIPELINE, "--reason", "change freeze")
    staging = demo.stage_in("staging", "Aborted", "Failed", "Promoted")
    prod = demo.stage_in("prod", "Aborted", "Blocked", "RollingOut", "AwaitingApproval")
    phase = wait_for(
        lambda: (p := demo.dm_status(demo.hub).get("phase")) in ("RolledBack", "Failed") and p,
        120,
        "staging's rollout rolled back",
    )
    status = demo.dm_status(demo.hub)
    return {
        "abort_exit": aborted.returncode,
        "staging": staging,
        "prod": prod,
        "hub_phase": phase,
        "hub_failed_reason": (status.get("failedRevision") or {}).get("reason"),
        "serving_before": serving,
        "serving_after": (status.get("stableRevision") or {}).get("model"),
        "pipeline_phase": demo.pipeline().get("phase"),
    }


def bad_input(demo: Demo) -> dict[str, Any]:
    """A dependency cycle (CEL cannot see it) and a stage naming a cluster no worker polls."""

    def applied(name: str, stages: list[dict[str, Any]]) -> None:
        demo.hub.apply(
            {
                "apiVersion": "decisionmodel.io/v1alpha1",
                "kind": "DecisionModelPipeline",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"template": {"spec": {"model": "laya:en"}}, "stages": stages},
            }
        )

    def condition(name: str, kind: str) -> dict[str, Any] | None:
        st = get_json(demo.hub, "dmp", name, "-n", NAMESPACE).get("status") or {}
        return next((c for c in st.get("conditions") or [] if c.get("type") == kind), None)

    where = {"cluster": STAGE_CLUSTER["prod"], "namespace": NAMESPACE}
    applied(
        "loop",
        [{"name": "a", "dependsOn": ["b"], **where}, {"name": "b", "dependsOn": ["a"], **where}],
    )
    # A served stage first: it must not roll out while the next one has no worker.
    near = {"name": "near", "cluster": STAGE_CLUSTER["hub"], "namespace": NAMESPACE}
    far = {"name": "far", "cluster": "nowhere", "namespace": NAMESPACE, "dependsOn": ["near"]}
    applied("lost", [near, far])
    loop = wait_for(lambda: condition("loop", "Accepted"), 60, "loop's Accepted condition")
    lost = wait_for(
        lambda: condition("lost", "StageWorkersPolling"), 60, "lost's StageWorkersPolling"
    )
    loop_status = get_json(demo.hub, "dmp", "loop", "-n", NAMESPACE).get("status") or {}
    lost_status = get_json(demo.hub, "dmp", "lost", "-n", NAMESPACE).get("status") or {}

    def applied_anywhere(name: str) -> list[bool]:
        return [
            c.kubectl("get", "dm", name, "-n", NAMESPACE, check=False).returncode == 0
            for c in (demo.hub, demo.prod)
        ]

    observed: dict[str, Any] = {
        "loop": loop,
        "loop_phase": loop_status.get("phase"),
        "loop_run": loop_status.get("workflowId"),
        "loop_applied": applied_anywhere("loop"),
        "lost": lost,
        "lost_run": lost_status.get("workflowId"),
        "lost_applied": applied_anywhere("lost"),
    }
    for name in ("loop", "lost"):
        demo.hub.kubectl("delete", "dmp", name, "-n", NAMESPACE, "--wait=false")
    return observed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localenv.pipeline_demo")
    parser.add_argument("--json", type=Path, default=None, help="write the observations here")
    parser.add_argument(
        "--scenarios",
        action="store_true",
        help="then a tag moved between the stages, and a candidate failing in staging",
    )
    args = parser.parse_args(argv)
    # SIGTERM (a caller's timeout) unwinds like Ctrl-C: the environment stops what it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    state = Path(tempfile.mkdtemp(prefix="dmrollout-pipeline-demo-"))
    namespaces = tuple(n for n in {*ROLLOUT_NS.values(), PIPELINES_NS} if n != "default")
    result: dict[str, Any] = {"state": str(state)}
    with MultiClusterEnv(state, ("hub", "prod"), temporal_namespaces=namespaces) as env:
        say(f"clusters up in {env.timings['start']:.1f} s; Temporal UI {env.temporal.ui_url}")
        demo = Demo(env, state)
        demo.install()
        began = time.monotonic()
        result["promotion"] = promote_through(demo)
        result["promotion_seconds"] = time.monotonic() - began
        if args.scenarios:
            result["tag_moved"] = tag_moved(demo)
            result["failing"] = failing_candidate(demo)
            result["partition"] = partition(demo)
            result["abort"] = abort_in_flight(demo)
            result["bad_input"] = bad_input(demo)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    say(f"done; state and logs in {state}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
