"""evaluate's heartbeat details (activities.evaluate.EvaluationHeartbeat): pure.

Moved from tests/integration/test_activities_pods.py, where the cluster marker kept it out of
``make unit``; what it asserts is unchanged.
"""

from __future__ import annotations

import json

from activities.evaluate import EvaluationHeartbeat
from decisionmodel.evaluation import EvaluationProgress


def test_heartbeat_details_round_trip_as_json() -> None:
    # What the worker's payload converter does to heartbeat details between attempts.
    progress = EvaluationProgress(dataset_digest="d" * 64)
    beat = EvaluationHeartbeat(candidate_revision="r", candidate=progress, dataset_digest="d" * 64)
    again = EvaluationHeartbeat.model_validate(json.loads(json.dumps(beat.details())))
    assert again == beat
