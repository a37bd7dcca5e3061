"""No API key and no dataset content in workflow history (nor in Events and status).

The rollouts are those of ``tests/record_histories.py`` (an API key Secret on the DecisionModel,
evaluation over a golden set whose every state text carries a marker unique to this run,
manual promotion with a rejected stale approval and the bound one, a rollback, a supersede),
plus a first rollout whose dataset has a malformed line holding the marker (DatasetInvalid).

Every event of every history is searched as JSON text *and* with every base64 field decoded:
proto JSON writes payload bytes (inputs, results, heartbeat details in timeout failures) as
base64, where a plain text search would never find anything. The search is shown to work by
finding what history must contain: the Secret's and the ConfigMap's names (references).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterator
from typing import Any

import record_histories as rec
from harness.rollout_harness import RolloutHarness
from temporalio.client import WorkflowHistory

from decisionmodel.rollout.contracts import RolloutResult


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def searchable(json_text: str) -> str:
    """The JSON text plus the UTF-8 decoding of every string that is valid base64."""
    parts = [json_text]
    for s in _strings(json.loads(json_text)):
        if len(s) < 4 or len(s) % 4:
            continue
        try:
            parts.append(base64.b64decode(s, validate=True).decode("utf-8"))
        except (binascii.Error, UnicodeDecodeError):
            continue
    return "\n".join(parts)


def leaks(text: str, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s in text]


def test_searchable_decodes_payloads() -> None:
    encoded = base64.b64encode(b'{"name":"golden-set"}').decode()
    doc = json.dumps({"payloads": [{"metadata": {}, "data": encoded}]})
    assert "golden-set" not in doc
    assert "golden-set" in searchable(doc)


async def test_no_api_key_or_dataset_content_in_history(harness: RolloutHarness) -> None:
    api_key = f"sk-live-{uuid.uuid4().hex}"
    marker = f"GOLDEN-MARKER-{uuid.uuid4().hex}"
    handles = await rec.run_scenarios(harness, api_key=api_key, marker=marker)
    dataset = rec.marked_golden_jsonl(rec.CASES, seed=11, marker=marker)

    # A first rollout whose dataset's third line is malformed and holds the marker.
    lines = dataset.splitlines()
    malformed = f'{{"state": "{marker} refund for invoice 99", "questions": {{'
    harness.golden_configmap("broken", "\n".join([lines[0], lines[1], malformed]) + "\n")
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "broken", "key": "cases.jsonl"}},
        "minAccuracy": "0.50",
    }
    harness.create_dm(
        "broken-ds",
        {
            "model": "laya:en",
            "auth": {"apiKeySecretRef": {"name": rec.KEY_SECRET, "key": "token"}},
            "rollout": {"evaluation": evaluation, "promotion": "Manual"},
        },
    )
    handle = await harness.start(harness.input_for("broken-ds"))
    failed = await handle.result()
    assert failed.result == RolloutResult.FAILED and failed.reason == "DatasetInvalid", failed
    assert "line 3" in (failed.message or "")
    handles["dataset_invalid"] = handle

    secrets = [api_key, marker, *rec.state_texts(dataset), f"{marker} refund for invoice 99"]
    assert len(handles) == 5
    for name, h in handles.items():
        history = await h.fetch_history()
        text = searchable(history.to_json())
        assert leaks(text, secrets) == [], f"{name}: secret or dataset content in history"
        # References are there: the search reads inside the payloads.
        assert rec.KEY_SECRET in text, name
        if name != "first":
            dataset_ref = "broken" if name == "dataset_invalid" else rec.DATASET
            assert f'"name":"{dataset_ref}"' in text.replace(" ", ""), name

    # Nor in what users read: the Events and the status of the DecisionModels.
    events = harness.kubectl("get", "events", "-o", "json")
    dms = harness.kubectl("get", "dm", "-o", "json")
    assert "ApprovalRejected" in events and "DatasetInvalid" in dms
    assert leaks(events, secrets) == []
    assert leaks(dms, secrets) == []


def test_committed_histories_hold_no_recording_secrets() -> None:
    """The committed histories were recorded with known values: none of them is in there."""
    dataset = rec.marked_golden_jsonl(rec.CASES, seed=11, marker=rec.RECORDING_MARKER)
    secrets = [rec.RECORDING_API_KEY, rec.RECORDING_MARKER, *rec.state_texts(dataset)]
    for folder, name in ((f, n) for f in rec.HISTORY_SETS for n in rec.RECORDED):
        text = (folder / f"{name}.json").read_text()
        history = WorkflowHistory.from_json(name, text)
        assert history.events, name
        decoded = searchable(text)
        assert rec.KEY_SECRET in decoded, name
        assert leaks(decoded, secrets) == [], name
