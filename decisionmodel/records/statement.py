"""The in-toto Statement of one decision: subject the model's digest, predicate why.

Numbers, names, digests and reasons only, like the workflow history: the evaluation's decision
record (gates, intervals, verdicts), never a case, a label or a secret value.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from decisionmodel.records.dsse import RecordProblem

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://decisionmodel.io/decision-record/v1"

Decision = Literal["Promote", "RollBack", "Hold"]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RecordedModel(_Part):
    namespace: str
    name: str
    uid: str


class RecordedRevision(_Part):
    hash: str
    model: str
    digest: str = Field(pattern=r"^[a-f0-9]{64}$")


class RecordedApproval(_Part):
    """The approval a person gave (its token binds the evidence shown), and who, as the
    workflow history recorded the caller's identity."""

    token: str
    by: str = ""
    via: str = ""  # the update or signal that carried it


class RecordedRun(_Part):
    workflow_id: str = Field(alias="workflowId")
    run_id: str = Field(alias="runId")
    namespace: str = ""


class RecordedBuilds(_Part):
    worker: str
    controller: str = ""


class DecisionPredicate(_Part):
    decision_model: RecordedModel = Field(alias="decisionModel")
    sequence: int = Field(ge=1)
    previous: str | None = None  # "sha256:<hex>" of the previous record's envelope
    decision: Decision
    reason: str
    message: str
    revision: RecordedRevision
    stable: str | None = None  # the revision serving when the decision was taken
    policy: dict[str, Any]
    policy_digest: str = Field(alias="policyDigest")
    dataset_digest: str | None = Field(default=None, alias="datasetDigest")
    evaluation: dict[str, Any] | None = None
    approval: RecordedApproval | None = None
    run: RecordedRun
    builds: RecordedBuilds
    recorded_at: str = Field(alias="recordedAt")


def statement_bytes(predicate: DecisionPredicate) -> bytes:
    """The Statement as canonical JSON (sorted keys, no spaces): the signed payload."""
    body = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": predicate.revision.model, "digest": {"sha256": predicate.revision.digest}}
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate.model_dump(mode="json", by_alias=True),
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def read_statement(payload: bytes) -> DecisionPredicate:
    """The predicate of a verified payload; RecordProblem when it is not a decision record
    or its subject is not the digest its predicate names."""
    try:
        body = json.loads(payload)
        kind, predicate_type = body["_type"], body["predicateType"]
        subjects = body["subject"]
        predicate = DecisionPredicate.model_validate(body["predicate"])
    except (ValueError, KeyError, TypeError, ValidationError) as e:
        raise RecordProblem(f"not a decision record: {str(e)[:160]}") from None
    if kind != STATEMENT_TYPE or predicate_type != PREDICATE_TYPE:
        raise RecordProblem(f"not a decision record (predicate type {predicate_type!r})")
    digests = [s.get("digest", {}).get("sha256") for s in subjects if isinstance(s, dict)]
    if digests != [predicate.revision.digest]:
        raise RecordProblem(
            f"subject {digests} is not the model digest {predicate.revision.digest} the "
            "record names"
        )
    return predicate
