"""Record the RolloutWorkflow histories that tests/integration/test_workflow_replay.py replays.

Run inside the private network namespace (it starts its own local cluster, Temporal dev server
and simulators in a temporary directory, about a minute)::

    hack/in-netns.sh .venv/bin/python tests/record_histories.py

It writes ``tests/integration/histories/{promoted,rolled_back,superseded}.json`` (``--out`` for
another folder: the histories of the code since ``status-in-steps`` are in
``histories/status_in_steps/``, recorded with ``--out``). Re-record only together with a
deliberate, versioned change of the workflow (``workflow.patched``): the point of the committed
files is that they are histories written by the *previous* code.

The scenarios are also what tests/e2e/test_history_secrets.py runs (with a fresh API key and
marker) to prove that no secret and no dataset content reaches history. On one DecisionModel
with an API key Secret (``spec.auth.apiKeySecretRef``):

1. ``first``: laya:en, automatic (the first revision is never held);
2. ``promoted``: a second revision with evaluation (candidate and baseline) and manual
   promotion: a stale approval signal is rejected, the bound one promotes, the grace timer runs
   and the previous revision is deleted;
3. ``rolled_back``: a third revision scoring below minAccuracy: EvaluationFailed, RolledBack;
4. ``superseded``: a fourth revision whose Pods can never be scheduled, cancelled during
   prefetch (as the controller cancels a rollout a newer revision supersedes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import (
    RolloutHarness,
    connect,
    in_process_worker,
    install_crd,
    put_model,
)
from temporalio.client import WorkflowHandle

from decisionmodel.rollout.contracts import Phase, RolloutOutcome, RolloutProgress, RolloutResult
from localenv.cluster import in_private_netns
from localenv.env import LocalEnv
from simulators.answers import make_golden_set, true_answer
from workflows.rollout import RolloutWorkflow

HISTORIES = Path(__file__).resolve().parent / "integration" / "histories"
RECORDED = ("promoted", "rolled_back", "superseded")
# Every committed set: before the workflow change "status-in-steps", and after it.
HISTORY_SETS = (HISTORIES, HISTORIES / "status_in_steps")
# The values behind the committed histories: test_history_secrets checks they are not in them.
RECORDING_API_KEY = "rec-apikey-5b0c1d7e9a2f"
RECORDING_MARKER = "REC-GOLDEN-MARKER-c41f0e"

DM = "rec"
KEY_SECRET = "rec-runtime-key"
DATASET = "rec-golden"
CASES = 20

Handle = WorkflowHandle[Any, RolloutOutcome]


def marked_golden_jsonl(n: int, seed: int, marker: str) -> str:
    """A golden set whose every case's text carries ``marker``, its ``expected`` answers
    recomputed for the marked state (the simulator's truth hashes the state), so a model's
    accuracy on it is what its profile says."""
    cases = make_golden_set(n, seed=seed)
    for case in cases:
        state = case["state"]
        if isinstance(state, str):
            state = f"{marker} {state}"
        elif isinstance(state, dict):
            state = {**state, "text": f"{marker} {state['text']}"}
        else:
            state = [{**turn, "text": f"{marker} {turn['text']}"} for turn in state]
        case["state"] = state
        case["expected"] = {qid: true_answer(state, qid, q) for qid, q in case["questions"].items()}
    return "".join(json.dumps(c) + "\n" for c in cases)


def state_texts(jsonl: str) -> list[str]:
    """Every text of the dataset's states (what must never reach history)."""
    texts: list[str] = []
    for line in jsonl.splitlines():
        state = json.loads(line)["state"]
        if isinstance(state, str):
            texts.append(state)
        elif isinstance(state, dict):
            texts.append(state["text"])
        else:
            texts.extend(turn["text"] for turn in state)
    return texts


def evaluation(max_cases: int = CASES) -> dict[str, Any]:
    return {
        "datasetRef": {"configMapRef": {"name": DATASET, "key": "cases.jsonl"}},
        # 0.95 scores about 0.88 on 20 cases, 0.40 about 0.37: far from the gate either way.
        "minAccuracy": "0.70",
        "maxAccuracyDrop": "0.10",
        "maxCases": max_cases,
    }


async def run(h: RolloutHarness, name: str, timeout: float = 120) -> tuple[Handle, RolloutOutcome]:
    handle = await h.start(h.input_for(name))
    return handle, await asyncio.wait_for(handle.result(), timeout)


async def awaiting_promotion(handle: Handle) -> RolloutProgress:
    async def check() -> RolloutProgress:
        p = await handle.query(RolloutWorkflow.progress)
        if p.result is not None:  # ended instead of waiting: no point in waiting longer
            raise RuntimeError(f"rollout ended {p.result}: {p.reason} {p.message}")
        assert p.phase == Phase.AWAITING_PROMOTION, p.phase
        return p

    return await async_assert_eventually(check, 90, what="AwaitingPromotion")


async def run_scenarios(h: RolloutHarness, *, api_key: str, marker: str) -> dict[str, Handle]:
    """The four rollouts of the module docstring, in order; their handles by name."""
    put_model("laya", "rec-good", accuracy=0.95, revision="rec-good")
    put_model("laya", "rec-bad", accuracy=0.40, revision="rec-bad")
    h.api_key_secret(KEY_SECRET, api_key)
    h.golden_configmap(DATASET, marked_golden_jsonl(CASES, seed=11, marker=marker))
    auth = {"apiKeySecretRef": {"name": KEY_SECRET, "key": "token"}}
    handles: dict[str, Handle] = {}

    h.create_dm(DM, {"model": "laya:en", "replicas": 2, "auth": auth})
    handles["first"], first = await run(h, DM)
    assert first.result == RolloutResult.PROMOTED, first

    h.update_spec(
        DM,
        {"model": "laya:rec-good", "rollout": {"evaluation": evaluation(), "promotion": "Manual"}},
    )
    handle = await h.start(h.input_for(DM))
    handles["promoted"] = handle
    waiting = await awaiting_promotion(handle)
    assert waiting.expected_approval is not None
    await handle.signal(RolloutWorkflow.promote, str(first.revision))  # stale: rejected

    async def rejected() -> bool:
        p = await handle.query(RolloutWorkflow.progress)
        return len(p.rejected_approvals) == 1

    await async_assert_eventually(rejected, 30, what="stale approval rejected")
    await handle.signal(RolloutWorkflow.promote, waiting.expected_approval)
    promoted = await asyncio.wait_for(handle.result(), 120)
    assert promoted.result == RolloutResult.PROMOTED, promoted

    h.update_spec(DM, {"model": "laya:rec-bad"})
    handles["rolled_back"], rolled_back = await run(h, DM)
    assert rolled_back.result == RolloutResult.ROLLED_BACK, rolled_back
    assert rolled_back.reason == "EvaluationFailed", rolled_back

    never = {f"record.dmrollout.dev/never-{uuid.uuid4().hex[:6]}": "true"}
    jobs = set(h.names("job"))
    h.update_spec(DM, {"model": "laya:en", "scheduling": {"nodeSelector": never}})
    handle = await h.start(h.input_for(DM))
    handles["superseded"] = handle
    await eventually(lambda: set(h.names("job")) - jobs, 60, what="the fourth prefetch Job")
    await handle.cancel()
    superseded = await asyncio.wait_for(handle.result(), 60)
    assert superseded.result == RolloutResult.SUPERSEDED, superseded
    return handles


async def record(env: LocalEnv, out: Path) -> None:
    install_crd(env.cluster)
    client = await connect(env.temporal.address)
    queue = f"record-{uuid.uuid4().hex[:8]}"
    async with in_process_worker(client, env.cluster, queue):
        h = RolloutHarness(env.cluster, client, queue)
        handles = await run_scenarios(h, api_key=RECORDING_API_KEY, marker=RECORDING_MARKER)
        out.mkdir(parents=True, exist_ok=True)
        for name in RECORDED:
            history = await handles[name].fetch_history()
            (out / f"{name}.json").write_text(history.to_json() + "\n")
            print(f"wrote {out / f'{name}.json'} ({len(history.events)} events)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HISTORIES)
    args = parser.parse_args(argv)
    if not in_private_netns():
        print("run inside the private network namespace: hack/in-netns.sh", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="record-histories-") as state:
        env = LocalEnv(Path(state))
        try:
            env.start()
            asyncio.run(record(env, args.out))
        finally:
            env.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
