"""A retry of a pipeline's failed run (issue 34). Pure.

A run that failed or was aborted is the record of its revision, never started again by
itself. A new value of ``decisionmodel.io/retry`` on the DecisionModelPipeline (as on a
DecisionModel; ``dmrollout pipeline retry``) starts one more run of the same revision, ID
``<run of the revision>/<retry generation>``. It carries what the failed run established, read
from the status the run wrote: the freight (the digest its stages verified: a retry never
resolves the tag again, only a changed spec does, as a new revision) and the stages it
promoted, with when (they are not rolled out again; a soak counts from their promotion).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from decisionmodel.pipeline.contracts import Freight
from decisionmodel.vocabulary import PipelinePhase, StageState, StatusKey


def retry_key(token: str) -> str:
    """8 hex of the token, as a DecisionModel's retry generation (rollout.contracts.retry_key;
    the two packages are independent layers)."""
    return hashlib.sha256(token.encode()).hexdigest()[:8]


RETRYABLE_PHASES = frozenset({PipelinePhase.FAILED.value, PipelinePhase.ABORTED.value})


class Retry(BaseModel):
    model_config = ConfigDict(frozen=True)

    token: str
    workflow_id: str
    retry_of: str
    freight: Freight | None = None
    promoted: dict[str, datetime] = {}


def retry_asked(
    status: Mapping[str, Any], current: str, base: str, token: str | None
) -> Retry | None:
    """The retry a new token asks for: only of the revision's current run, once it ended
    Failed or Aborted (a token set earlier is used when it does, once: it is then consumed)."""
    if not token or token == status.get(StatusKey.LAST_RETRY_TOKEN):
        return None
    if status.get("workflowId") != current or status.get("phase") not in RETRYABLE_PHASES:
        return None
    freight = status.get("freight") or {}
    return Retry(
        token=token,
        workflow_id=f"{base}/{retry_key(token)}",
        retry_of=current,
        freight=Freight(model=freight["model"], digest=freight["digest"])
        if freight.get("model") and freight.get("digest")
        else None,
        promoted={
            s["name"]: datetime.fromisoformat(s["since"])
            for s in status.get("stages") or []
            if s.get("state") == StageState.PROMOTED and s.get("since")
        },
    )
