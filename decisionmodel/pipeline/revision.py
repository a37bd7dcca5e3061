"""A pipeline's revision and the ID of its run (issue 25). Pure.

The revision is a hash of the spec as the API server stores it (template and stages, wire form,
keys sorted): any change to either is a new revision, and a new run that supersedes the old.
One run per (pipeline, revision): ``pipeline/<namespace>/<name>/<revision>``, so starting it
twice is one run (Temporal refuses a second start of a running ID).
"""

from __future__ import annotations

import hashlib
import json

from decisionmodel.api.pipeline import DecisionModelPipelineSpec
from decisionmodel.pipeline.contracts import PIPELINE_WORKFLOW_ID_PREFIX


def pipeline_revision(spec: DecisionModelPipelineSpec) -> str:
    text = json.dumps(spec.to_wire(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pipeline_workflow_id(namespace: str, name: str, revision: str) -> str:
    return f"{PIPELINE_WORKFLOW_ID_PREFIX}/{namespace}/{name}/{revision}"
