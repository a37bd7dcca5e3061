"""write_decision_record: the signed, chained record of one decision (issue 38, item 6).

Promote, roll back, hold: each writes one in-toto Statement (subject: the model's digest),
signed as a DSSE envelope with the platform team's key (a Secret in the records namespace,
read per record so that a fixed or rotated key is used at once; its value never leaves this
activity), stored as an immutable ConfigMap there (``kube.decision_records``). The record names
the previous one of its DecisionModel, so ``dmrollout verify`` sees a record removed.

Idempotent: a retried attempt finds the record its run already wrote for this decision and
returns it. A promotion waits for its record (``blocking``): a record that cannot be written is
shown at once on Promoted, naming the fix, and retried; the traffic is not switched meanwhile.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from temporalio import activity
from temporalio.client import Client

from activities.typed_errors import typed_errors
from decisionmodel.errors import DecisionRecordUnwritten
from decisionmodel.records.chain import ChainReport, VerifiedRecord, envelope_digest, verify_chain
from decisionmodel.records.dsse import RecordProblem, load_signing_key, seal
from decisionmodel.records.statement import (
    DecisionPredicate,
    RecordedApproval,
    RecordedBuilds,
    RecordedModel,
    RecordedRevision,
    RecordedRun,
    statement_bytes,
)
from decisionmodel.rollout.contracts import (
    WRITE_DECISION_RECORD,
    DecisionRecordInput,
    DecisionRecordResult,
)
from decisionmodel.rollout.settings import RolloutSettings, worker_build
from decisionmodel.vocabulary import ConditionType, EventReason
from kube import decision_records as store
from kube.client import Kube
from kube.errors import Conflict, KubeError
from kube.rollout_status import show_guard
from kube.status import emit_event

# Who approved, read from the run's own history (the identity Temporal recorded for the
# update or signal that carried the approval): bounded, a history is paged.
APPROVER_LOOKUP_SECONDS = 30.0


class DecisionRecordActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings, client: Client | None = None):
        self.kube, self.settings, self.client = kube, settings, client

    @activity.defn(name=WRITE_DECISION_RECORD)
    async def write_decision_record(self, inp: DecisionRecordInput) -> DecisionRecordResult:
        namespace = self.settings.decision_records_namespace
        if namespace is None:
            return DecisionRecordResult(written=False, why="decision records are off")
        if not inp.candidate.digest:
            return DecisionRecordResult(written=False, why="the revision has no model digest")
        async with typed_errors():
            try:
                return await self._write(inp, namespace)
            except DecisionRecordUnwritten as e:
                if inp.blocking:
                    first = activity.info().attempt == 1
                    await show_guard(
                        self.kube, inp.dm, ConditionType.PROMOTED, e.reason,
                        f"the promotion waits for its signed decision record: {e}", first,
                    )  # fmt: skip
                raise

    async def _write(self, inp: DecisionRecordInput, namespace: str) -> DecisionRecordResult:
        pem = await Kube.run(
            store.read_signing_key, self.kube, namespace, self.settings.decision_records_key_secret
        )
        try:
            key = load_signing_key(pem)
        except RecordProblem as e:
            secret = f"{namespace}/{self.settings.decision_records_key_secret}"
            raise DecisionRecordUnwritten(f"Secret {secret}: {e}") from None
        info = activity.info()
        while True:
            try:
                chain = await Kube.run(
                    store.list_records, self.kube, namespace, {store.LABEL_UID: inp.dm.uid}
                )
            except KubeError as e:
                raise store.store_problem(e, namespace) from None
            report = verify_chain([s for _, s in chain], key.public_key())
            mine = _already_written(report, info.workflow_run_id, inp.decision)
            if mine is not None:
                return mine
            last = report.records[-1] if report.records else None
            predicate = await self._predicate(inp, last)
            envelope = seal(key, statement_bytes(predicate))
            name = store.record_name(inp.dm.name, inp.dm.uid, predicate.sequence)
            labels = _labels(inp, predicate)
            try:
                await Kube.run(store.create_record, self.kube, namespace, name, labels, envelope)
            except Conflict:
                continue  # another run took this sequence: read the chain again
            except KubeError as e:
                raise store.store_problem(e, namespace) from None
            result = DecisionRecordResult(
                written=True,
                name=name,
                sequence=predicate.sequence,
                digest=envelope_digest(envelope),
            )
            await self._show_head(inp, namespace, result)
            await _announce(self.kube, inp, namespace, result)
            return result

    async def _predicate(
        self, inp: DecisionRecordInput, last: VerifiedRecord | None
    ) -> DecisionPredicate:
        """The record of this decision, chained after ``last`` (the verified head, or None)."""
        info = activity.info()
        return DecisionPredicate(
            decision_model=RecordedModel(
                namespace=inp.dm.namespace, name=inp.dm.name, uid=inp.dm.uid
            ),
            sequence=(last.predicate.sequence + 1) if last else 1,
            previous=last.digest if last else None,
            decision=inp.decision,
            reason=inp.reason,
            message=inp.message[:2000],
            revision=RecordedRevision(
                hash=inp.candidate.hash,
                model=inp.candidate.model,
                digest=inp.candidate.digest,
            ),
            stable=inp.stable,
            policy=inp.policy.model_dump(mode="json"),
            policy_digest=inp.policy.digest(),
            dataset_digest=inp.evaluation.dataset_digest if inp.evaluation else None,
            evaluation=_evaluation(inp),
            approval=await self._approval(inp),
            run=RecordedRun(
                workflow_id=info.workflow_id or "",
                run_id=info.workflow_run_id or "",
                namespace=info.workflow_namespace,
            ),
            builds=RecordedBuilds(
                worker=worker_build(self.settings),
                controller=inp.controller_build,
            ),
            recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )

    async def _show_head(
        self, inp: DecisionRecordInput, namespace: str, result: DecisionRecordResult
    ) -> None:
        """status.decisionRecord names the new head; best effort: the record is written, and
        verify names the gap."""
        head = {
            "sequence": result.sequence,
            "digest": result.digest,
            "name": result.name,
            "namespace": namespace,
            "decision": inp.decision,
            "revision": inp.candidate.hash,
        }
        try:
            await Kube.run(store.show_head, self.kube, inp.dm, head)
        except KubeError as e:
            activity.logger.warning("status.decisionRecord not written: %s", e)

    async def _approval(self, inp: DecisionRecordInput) -> RecordedApproval | None:
        if inp.approval is None:
            return None
        by, via = "", ""
        if self.client is not None:
            try:
                async with asyncio.timeout(APPROVER_LOOKUP_SECONDS):
                    by, via = await _approver(self.client)
            except (TimeoutError, RuntimeError) as e:
                activity.logger.warning("approver not read from history: %s", e)
        return RecordedApproval(token=inp.approval, by=by, via=via)


async def _approver(client: Client) -> tuple[str, str]:
    """The identity and the message of the last approval or rejection the run received."""
    info = activity.info()
    handle = client.get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)
    by, via = "", ""
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_update_accepted_event_attributes"):
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name in ("approve", "reject"):
                by, via = request.meta.identity, f"update {request.input.name}"
        elif event.HasField("workflow_execution_signaled_event_attributes"):
            signal = event.workflow_execution_signaled_event_attributes
            if signal.signal_name == "promote":
                by, via = signal.identity, "signal promote"
    return by, via


def _already_written(
    report: ChainReport, run_id: str | None, decision: str
) -> DecisionRecordResult | None:
    """This run's record of this decision, when an earlier attempt wrote it."""
    for r in report.records:
        if r.predicate.run.run_id == run_id and r.predicate.decision == decision:
            return DecisionRecordResult(
                written=True, name=r.name, sequence=r.predicate.sequence, digest=r.digest
            )
    return None


def _evaluation(inp: DecisionRecordInput) -> dict[str, object] | None:
    """The evaluation's figures and decision record (intervals, verdicts): numbers only."""
    if inp.evaluation is None:
        return None
    return inp.evaluation.model_dump(mode="json", exclude={"aggregates", "baseline_aggregates"})


async def _announce(
    kube: Kube, inp: DecisionRecordInput, namespace: str, result: DecisionRecordResult
) -> None:
    message = (
        f"{inp.decision} of revision {inp.candidate.hash} recorded as #{result.sequence} "
        f"({namespace}/{result.name}, {result.digest}); check with dmrollout verify "
        f"{inp.dm.name}"
    )
    await emit_event(kube, inp.dm, EventReason.DECISION_RECORDED, message)


def _labels(inp: DecisionRecordInput, predicate: DecisionPredicate) -> dict[str, str]:
    return {
        store.LABEL_UID: inp.dm.uid,
        store.LABEL_NAMESPACE: inp.dm.namespace,
        store.LABEL_NAME: inp.dm.name,
        store.LABEL_REVISION: inp.candidate.hash,
        store.LABEL_SEQUENCE: str(predicate.sequence),
    }
