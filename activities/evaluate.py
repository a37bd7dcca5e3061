"""The evaluate activity: run the golden dataset against the candidate's Pods (and the stable's).

Steps (REFERENCE.md "Evaluation"):

0. Policy: the rollout's gates, dataset reference and promotion mode must be the live
   DecisionModel's (``decisionmodel.rollout.policy_check``), else PolicyMismatch, permanent.
1. Read the dataset (ConfigMap key, or a Secret key labelled ``decisionmodel.io/eval-dataset``).
   A missing object or key, or an unlabelled Secret, is *transient* (DatasetNotFound,
   SecretNotAllowed): the rollout holds in Evaluating until the user fixes it or the
   evaluating timeout (the activity's schedule-to-close) ends it. A malformed dataset is
   DatasetInvalid, permanent, naming the line.
2. Resume: the previous attempt's heartbeat (:class:`EvaluationHeartbeat`) is reused when its
   dataset digest and revisions match, so a retried attempt (worker crash, Pod lost) continues
   at ``next_case_index`` instead of case 1.
3. Candidate: the cases are spread over every model-ready Pod of the candidate, two in flight
   per Pod (``activities.evaluate_lanes``; ``decisionmodel.evaluation.spread``), each as
   ``POST /v1/systemone`` (QUEUE_FULL retried inside the client, which holds the Pod's other
   requests meanwhile); answers are counted in dataset order, so the heartbeat is always a
   prefix of the dataset. A case the runtime rejects permanently (4xx), or answers with a
   body that is not a readable answer, counts as failed; every other failure fails the
   attempt (retried, resumed).
4. Baseline: only when a relative gate is set and a stable exists, the same cases over the
   model-ready stable Pods, with its own resumable progress.
5. ``evaluate_gates`` → :class:`EvaluationOutcome`. A failed gate is a *result*, not an error:
   the workflow decides what it means.

Only numbers leave this activity: heartbeats carry counts and sums, the outcome carries
4-place figures; errors name line numbers, objects and HTTP statuses, never a case.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from temporalio import activity

from activities import step_status
from activities.evaluate_lanes import FAILED_CASE, in_flight_per_pod, sender
from activities.evaluate_sequential import Decided, SequentialRun, other_gates
from activities.policy import LivePolicy, read_live_policy
from activities.step_status import writes_step_status
from activities.typed_errors import show_guards, typed_errors
from activities.warmup_inspect import HeartbeatTicker, RuntimeClientFactory
from decisionmodel.engine.runtime_client import RuntimeClient
from decisionmodel.errors import DmrolloutError, InvalidEvaluationPolicy, ProbeError
from decisionmodel.evaluation import (
    EvaluationFigures,
    EvaluationGates,
    EvaluationProgress,
    GoldenCase,
    dataset_digest,
    decision_verdict,
    evaluate_gates,
    finalize,
    parse_dataset,
)
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.decimal_format import quantize4, render4
from decisionmodel.evaluation.decision import decide
from decisionmodel.evaluation.intervals import negative_flip_count
from decisionmodel.evaluation.phase_memory import PhaseMemory, PhaseMemoryStore
from decisionmodel.evaluation.spread import Lane, spread_cases
from decisionmodel.rollout.contracts import (
    EVALUATE,
    EvaluateInput,
    EvaluationOutcome,
    EvaluationPolicy,
    RevisionRecord,
)
from decisionmodel.rollout.policy_check import check_evaluation
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import ConditionType
from kube.client import Kube
from kube.pod_gate import gate_true, pod_ip, probe_eligible
from kube.secrets import SecretReader

Phase = Literal["dataset", "candidate", "baseline"]

# The heartbeat ticker stops beating after this long without a case done (see HeartbeatTicker).
EVALUATE_STALL_SECONDS = 600.0

# Each case's own outcome and the bootstrap sums, in this worker process only (never in history).
PHASES = PhaseMemoryStore()

# A sequential test with paired gates reads this many cases of both revisions before the paired
# gates first look: the betting test seldom decides a gate one margin away in fewer.
FIRST_ROUND = 100


class NoModelReadyPod(ProbeError):
    """No Pod of the revision has its gate True right now; transient (retried, resumed)."""


class EvaluationHeartbeat(BaseModel):
    """What evaluate heartbeats after every case, and reads back on a retried attempt.

    Counts and sums only (EvaluationProgress); ``waiting_*`` say why an attempt is held
    (dataset missing, Secret unlabelled, no ready Pod) for the workflow's timeout message.
    """

    model_config = ConfigDict(extra="ignore")

    phase: Phase = "dataset"
    dataset_digest: str | None = None
    cases_total: int = 0
    candidate_revision: str
    candidate: EvaluationProgress | None = None
    baseline_revision: str | None = None
    baseline: EvaluationProgress | None = None
    waiting_reason: str | None = None
    waiting_message: str | None = None
    # spec.rollout.evaluation.sequential: the cases the test had counted before this
    # evaluation, and its gate after the candidate's committed prefix (numbers only).
    sequential_offset: int | None = None
    sequential_gate: dict[str, Any] | None = None
    # Where this evaluation started the test (TestStart.to_wire), for a retried attempt.
    sequential_start: dict[str, Any] | None = None

    def details(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# What every phase of one attempt runs with: the input, the heartbeat, the API key, the ticker
# and the sequential test (None without one).
PhaseArgs = tuple[
    EvaluateInput, EvaluationHeartbeat, str | None, HeartbeatTicker, SequentialRun | None
]
# The memory of the candidate's phase and of the stable's (None: not run, or not every case).
Ran = tuple[PhaseMemory | None, PhaseMemory | None]


def _phase_of(
    inp: EvaluateInput, phase: Literal["candidate", "baseline"], state: EvaluationHeartbeat
) -> tuple[RevisionRecord, str, EvaluationProgress]:
    """The revision a phase asks, its model, and the phase's progress so far."""
    if phase == "candidate":
        progress, record, model = state.candidate, inp.candidate, inp.model
    else:
        assert inp.stable is not None
        progress, record, model = state.baseline, inp.stable, inp.stable.model
    assert progress is not None
    return record, model, progress


def gates_of(policy: EvaluationPolicy) -> EvaluationGates:
    try:
        return EvaluationGates.model_validate(policy.gates())
    except ValidationError as err:
        fields = ", ".join(".".join(map(str, e["loc"])) for e in err.errors())
        raise InvalidEvaluationPolicy(
            f"spec.rollout.evaluation: {fields} must be a decimal string in [0, 1]"
        ) from None


def previous_heartbeat(
    details: Sequence[Any], candidate_revision: str
) -> EvaluationHeartbeat | None:
    """The last attempt's heartbeat, when it is one of ours for this candidate."""
    if not details:
        return None
    try:
        found = EvaluationHeartbeat.model_validate(details[-1])
    except ValidationError:
        return None  # not ours, or counts that one pass could not have produced: start over
    return found if found.candidate_revision == candidate_revision else None


def resumed_progress(
    previous: EvaluationProgress | None, digest: str, cases: int
) -> EvaluationProgress:
    """``previous`` when it belongs to this dataset and fits it, else a fresh progress."""
    if (
        previous is not None
        and previous.dataset_digest == digest
        and previous.next_case_index <= cases
    ):
        return previous
    return EvaluationProgress(dataset_digest=digest)


def _phase_key(phase: str, revision: str, digest: str | None) -> tuple[str, ...]:
    info = activity.info()
    return (info.workflow_id or "", info.activity_id, phase, revision, digest or "")


def seed_parts(inp: EvaluateInput, digest: str) -> tuple[str, str, str]:
    """What the decision record names: the dataset and both revisions."""
    return digest, inp.candidate.hash, inp.stable.hash if inp.stable else ""


def negative_flips(
    candidate: list[CaseRecord] | None, stable: list[CaseRecord] | None
) -> Decimal | None:
    """The 4-place share of cases the stable got right and the candidate wrong."""
    if not candidate or stable is None or len(stable) != len(candidate):
        return None
    return quantize4(Fraction(negative_flip_count(candidate, stable), len(candidate)))


class EvaluateActivities:
    def __init__(
        self,
        kube: Kube,
        settings: RolloutSettings,
        runtime_client_factory: RuntimeClientFactory = RuntimeClient.for_pod,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.runtime_client_factory = runtime_client_factory
        self.secrets = SecretReader(kube)

    @activity.defn(name=EVALUATE)
    @writes_step_status(step_status.evaluated)
    async def evaluate(self, inp: EvaluateInput) -> EvaluationOutcome:
        guard = show_guards(self.kube, inp.dm, ConditionType.EVALUATED, inp.status)
        async with typed_errors(guard):
            # Every attempt, before a case is read: the gates must be the live spec's.
            live = await read_live_policy(self.kube, inp.dm)
            check_evaluation(inp, live.policy)
            gates = gates_of(inp.policy)
            baseline = inp.stable if inp.policy.needs_baseline else None
            previous = previous_heartbeat(activity.info().heartbeat_details, inp.candidate.hash)
            state = previous or EvaluationHeartbeat(candidate_revision=inp.candidate.hash)
            # A case is one decision (bounded by the runtime client's timeouts) and its retries
            # on QUEUE_FULL (seconds each); reporting nothing for ten minutes is stuck.
            stall = EVALUATE_STALL_SECONDS
            async with HeartbeatTicker(
                self.settings.poll_interval_seconds, stall_after=stall
            ) as ticker:
                try:
                    raw = await self.secrets.dataset(inp.dm.namespace, inp.policy.dataset, inp.dm)
                    digest = dataset_digest(raw)
                    cases = parse_dataset(raw, inp.policy.max_cases)
                    test = self._sequential(inp, live, raw, cases, state, digest)
                    cases = test.unseen(cases) if test is not None else cases
                    del raw
                    api_key = await self.secrets.api_key(inp.dm.namespace, inp.api_key)
                    await guard.passed()
                    state = self._resumed(state, inp.candidate, baseline, digest, cases, test)
                    run = (inp, state, api_key, ticker, test)
                    if test is not None and test.in_rounds:
                        ran, base_ran = await self._in_rounds(cases, test, baseline, run)
                    else:
                        ran, base_ran = await self._both(cases, baseline is not None, run)
                except DmrolloutError as err:
                    if not err.permanent:
                        # Held, not failed: keep the progress, say why, let Temporal retry.
                        ticker.update(self._waiting(state, err).details())
                    raise
            return await self._finish(inp, gates, state, digest, (ran, base_ran), test)

    async def _both(self, cases: list[GoldenCase], compare: bool, run: PhaseArgs) -> Ran:
        """The candidate's phase, then (to compare with) the stable's on the same cases."""
        inp, state, api_key, ticker, test = run
        ran = await self._run_phase(inp, "candidate", cases, state, api_key, ticker, test)
        assert state.candidate is not None
        # A sequential test that decided early: the stable answers the same cases.
        cases = cases[: state.candidate.next_case_index]
        if not compare:
            return ran, None
        return ran, await self._run_phase(inp, "baseline", cases, state, api_key, ticker)

    async def _in_rounds(
        self,
        cases: list[GoldenCase],
        test: SequentialRun,
        baseline: RevisionRecord | None,
        run: PhaseArgs,
    ) -> Ran:
        """A sequential test with gates read from the case records (paired, slices): the
        candidate answers a round of cases (fewer once minAccuracy fails), the stable the same
        ones (when compared), the other gates read them; the rounds grow by half until the
        test decides or the cases run out. A round is at most half again the cases before it,
        so the cases read past a decision are too."""
        until = min(FIRST_ROUND, len(cases))
        while True:
            ran, base_ran = await self._both(cases[:until], baseline is not None, run)
            if ran is not None:
                test.read(ran.records, base_ran.records if base_ran is not None else None)
            if test.decided or until >= len(cases):
                return ran, base_ran
            until = min(until + until // 2, len(cases))

    async def _finish(
        self,
        inp: EvaluateInput,
        gates: EvaluationGates,
        state: EvaluationHeartbeat,
        digest: str,
        ran: tuple[PhaseMemory | None, PhaseMemory | None],
        test: SequentialRun | None,
    ) -> EvaluationOutcome:
        """The outcome of every case run: figures, gates, the record, the aggregates."""
        assert state.candidate is not None
        # The bootstrap's sums were fed case by case; when they must be rebuilt (~0.6 ms a
        # case) the thread keeps this worker's loop heartbeating and serving the others.
        outcome = await asyncio.to_thread(
            self._outcome,
            inp,
            gates,
            finalize(state.candidate),
            finalize(state.baseline) if state.baseline is not None else None,
            digest,
            ran,
            test,
        )
        return outcome.model_copy(
            update={
                "aggregates": state.candidate.aggregates(),
                "baseline_aggregates": state.baseline.aggregates() if state.baseline else None,
            }
        )

    @staticmethod
    def _sequential(
        inp: EvaluateInput,
        live: LivePolicy,
        raw: bytes,
        cases: list[GoldenCase],
        previous: EvaluationHeartbeat,
        digest: str,
    ) -> SequentialRun | None:
        """The revision's sequential test, continued from the live ledger where it applies,
        or from where an earlier attempt of this evaluation (same dataset) started it."""
        policy = inp.policy
        if not policy.sequential or policy.confidence is None:
            return None
        same = previous.dataset_digest == digest and previous.sequential_start is not None
        stable = inp.stable.hash if inp.stable is not None and policy.needs_baseline else None
        return SequentialRun.begin(
            live.ledger,
            inp.candidate.hash,
            policy.min_accuracy,
            policy.confidence,
            raw,
            cases,
            previous.sequential_start if same else None,
            others=other_gates(policy.gates(), policy.slices, cases, stable),
        )

    @staticmethod
    def _resumed(
        previous: EvaluationHeartbeat,
        candidate: RevisionRecord,
        baseline: RevisionRecord | None,
        digest: str,
        cases: list[GoldenCase],
        test: SequentialRun | None,
    ) -> EvaluationHeartbeat:
        """This attempt's state: the previous attempt's counts where they still apply (a
        sequential test's only when it starts from the same counted cases)."""
        base_hash = baseline.hash if baseline is not None else None
        prev_base = previous.baseline if previous.baseline_revision == base_hash else None
        offset = test.begun.offset if test is not None else None
        if offset != previous.sequential_offset:
            previous = EvaluationHeartbeat(candidate_revision=candidate.hash)
            prev_base = None
        n = len(cases)
        return EvaluationHeartbeat(
            phase="candidate",
            dataset_digest=digest,
            cases_total=n,
            candidate_revision=candidate.hash,
            candidate=resumed_progress(previous.candidate, digest, n),
            baseline_revision=base_hash,
            baseline=resumed_progress(prev_base, digest, n) if baseline else None,
            sequential_offset=offset,
            sequential_gate=previous.sequential_gate,
            sequential_start=test.begun.to_wire() if test is not None else None,
        )

    @staticmethod
    def _waiting(state: EvaluationHeartbeat, err: DmrolloutError) -> EvaluationHeartbeat:
        return state.model_copy(
            update={"waiting_reason": err.reason, "waiting_message": str(err)[:300]}
        )

    async def _run_phase(
        self,
        inp: EvaluateInput,
        phase: Literal["candidate", "baseline"],
        cases: list[GoldenCase],
        state: EvaluationHeartbeat,
        api_key: str | None,
        ticker: HeartbeatTicker,
        test: SequentialRun | None = None,
    ) -> PhaseMemory | None:
        """Run the cases not done yet over every model-ready Pod of the phase's revision; the
        phase's memory (case records) when it covers every case it ran, else None. ``test``
        (the candidate's phase of a sequential evaluation) is fed every case and stops the
        phase once it decides."""
        record, model, progress = _phase_of(inp, phase, state)
        policy = inp.policy
        digest = state.dataset_digest or ""
        offset = state.sequential_offset or 0
        key = _phase_key(phase, record.hash, f"{digest}@{offset}")
        memory = PHASES.memory(key, progress.next_case_index)
        if policy.needs_case_records and len(memory.records) != progress.next_case_index:
            # Another worker ran the cases so far: intervals need every case's own outcome,
            # which never leaves a worker, so the phase runs again from its first case.
            progress = type(progress)(dataset_digest=progress.dataset_digest)
            setattr(state, phase, progress)
        if test is not None:
            test.resume(state.sequential_gate, progress.next_case_index)
        state.phase = phase
        state.waiting_reason = state.waiting_message = None
        ticker.update(state.details())
        if progress.next_case_index >= len(cases) or (test is not None and test.decided):
            return memory if len(memory.records) == progress.next_case_index else None
        pods = await self._ready_pods(inp.dm.namespace, inp.dm.name, record.hash)

        def commit(case: GoldenCase, answers: object) -> None:
            # In dataset order, once each (spread_cases): the heartbeat is a resumable prefix.
            if answers is FAILED_CASE:
                outcomes = progress.add_failed_case(case)
            else:
                outcomes = progress.add_case(case, answers)
            found = CaseRecord.of(outcomes, case.slice)
            if len(memory.records) == case.index:
                memory.add(found)
            try:
                if test is not None:
                    test.feed(found)  # raises Decided once the test has a verdict
            finally:
                if test is not None:
                    state.sequential_gate = test.wire()
                ticker.update(state.details())

        async with contextlib.AsyncExitStack() as stack:
            lanes = await self._lanes(stack, pods, api_key, model)
            with contextlib.suppress(Decided):
                await spread_cases(cases[progress.next_case_index :], lanes, commit)
        return memory if len(memory.records) == progress.next_case_index else None

    async def _lanes(
        self,
        stack: contextlib.AsyncExitStack,
        pods: list[dict[str, Any]],
        api_key: str | None,
        model: str,
    ) -> list[Lane[object]]:
        """One lane per Pod: a runtime client (closed with ``stack``) and its in-flight cap."""
        lanes: list[Lane[object]] = []
        for pod in pods:
            ip = pod_ip(pod)
            assert ip is not None  # probe_eligible checked it
            client = self.runtime_client_factory(
                ip,
                api_key=api_key,
                default_registry=self.settings.ollaya_registry,
                queue_full_attempts=self.settings.queue_full_attempts,
            )
            await stack.enter_async_context(client)
            lanes.append(Lane(send=sender(client, model), in_flight=in_flight_per_pod(pod)))
        return lanes

    async def _ready_pods(
        self, namespace: str, dm_name: str, revision: str
    ) -> list[dict[str, Any]]:
        """Every model-ready Pod of ``revision`` (by name), or NoModelReadyPod."""
        pods = await Kube.run(self.kube.list_revision_pods, namespace, dm_name, revision)
        ready = sorted(
            (p for p in pods if probe_eligible(p) and gate_true(p)),
            key=lambda p: str(p["metadata"]["name"]),
        )
        if not ready:
            raise NoModelReadyPod(
                f"no Pod of revision {revision} has the decisionmodel.io/model-ready gate True; "
                "the evaluation waits for one"
            )
        return ready

    @staticmethod
    def _outcome(
        inp: EvaluateInput,
        gates: EvaluationGates,
        candidate: EvaluationFigures,
        baseline: EvaluationFigures | None,
        digest: str,
        ran: tuple[PhaseMemory | None, PhaseMemory | None],
        test: SequentialRun | None = None,
    ) -> EvaluationOutcome:
        cand, base_ran = ran
        flips = negative_flips(
            cand.records if cand else None, base_ran.records if base_ran else None
        )
        found = evaluate_gates(candidate, gates, baseline, flips)
        decision = None
        if test is not None:
            assert cand is not None  # the phase ran every case up to the test's stop
            stable = base_ran.records if base_ran else None
            decision = test.decision(gates, cand.records, stable, seed_parts(inp, digest))
            found = decision_verdict(decision)
        elif inp.policy.confidence is not None:
            assert cand is not None  # needs_case_records: the phase ran every case
            decision = decide(
                gates,
                Decimal(inp.policy.confidence),
                cand.records,
                base_ran.records if base_ran else None,
                seed_parts(inp, digest),
                inp.policy.slices,
            )
            found = decision_verdict(decision)
        figures = candidate.rendered()
        if test is not None and candidate.cases == 0:
            # No case was new to the test: its accuracy is the test's, not a 0 of no cases.
            figures["accuracy"] = render4(test.gate.mean)
        base = baseline.rendered() if baseline is not None else None
        counts = f"{candidate.cases} cases, {candidate.failed_cases} failed"
        return EvaluationOutcome(
            result=found.result,
            reason=found.reason,
            message=f"{found.message} ({counts})",
            negative_flips=str(flips) if flips is not None else None,
            decision=decision,
            accuracy=figures["accuracy"],
            ece=figures["ece"],
            brier=figures["brier"],
            cases=candidate.cases,
            failed_cases=candidate.failed_cases,
            baseline_accuracy=base["accuracy"] if base else None,
            baseline_ece=base["ece"] if base else None,
            baseline_brier=base["brier"] if base else None,
            dataset_digest=digest,
        )
