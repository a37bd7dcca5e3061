"""With the payload codec on, Temporal stores ciphertext (issue 12, point 6).

A real `dmrollout worker` process, a client made as the controller makes it, and (last test) a
real `dmrollout controller` process all get the codec from the same environment
(DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR / _KEY_ID). The history is
then fetched by a client WITHOUT the codec, as Temporal (or whoever reads its database) sees it,
and searched as JSON text and with every base64 field decoded (``searchable``): the model
name, the DecisionModel's namespace and an activity's failure message appear nowhere except
where the server indexes them in clear by design (search attributes, the workflow ID).
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from harness.codec_env import CODEC_KEY_ID, CodecEnv
from harness.helpers import eventually
from harness.rollout_harness import ControllerProcess, RolloutHarness, put_model
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from test_history_secrets import searchable

from controller.temporal.payload_codec import ENCODING, KEY_ID_METADATA
from controller.temporal.rollouts import Rollouts
from decisionmodel.rollout.contracts import RolloutInput, RolloutResult
from localenv.cluster import LocalCluster

# Indexed by the server, hence clear with any codec: documented in docs/payload-encryption.md.
CLEAR_BY_DESIGN = ("searchAttributes", "workflowId")


def _without(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def _payloads(value: Any) -> Iterator[dict[str, Any]]:
    """Every protobuf-JSON Payload in a history: objects with metadata and data."""
    if isinstance(value, dict):
        if "metadata" in value and ("data" in value or "encoding" in value["metadata"]):
            yield value
        for v in value.values():
            yield from _payloads(v)
    elif isinstance(value, list):
        for v in value:
            yield from _payloads(v)


def _failures(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("failure", "cause") and isinstance(v, dict) and "message" in v:
                yield v
            yield from _failures(v)
    elif isinstance(value, list):
        for v in value:
            yield from _failures(v)


async def raw_history(env: CodecEnv, workflow_id: str) -> dict[str, Any]:
    """The history as a client without the codec gets it."""
    plain = await Client.connect(env.temporal.address, data_converter=pydantic_data_converter)
    history = await plain.get_workflow_handle(workflow_id).fetch_history()
    parsed: dict[str, Any] = json.loads(history.to_json())
    return parsed


def _without_patch_markers(history: dict[str, Any]) -> dict[str, Any]:
    """The history less its `workflow.patched` markers: the SDK's core writes their details (the
    patch id and a flag, no data of ours) itself, without the payload codec."""
    events = [
        e
        for e in history.get("events", [])
        if e.get("markerRecordedEventAttributes", {}).get("markerName") != "core_patch"
    ]
    return {**history, "events": events}


def assert_all_payloads_encrypted(history: dict[str, Any]) -> int:
    payloads = list(_payloads(_without(_without_patch_markers(history), ("searchAttributes",))))
    assert payloads, "the search found no payload at all"
    for p in payloads:
        meta = {k: base64.b64decode(v) for k, v in p["metadata"].items()}
        assert meta.get("encoding") == ENCODING, p
        assert meta.get(KEY_ID_METADATA) == CODEC_KEY_ID.encode(), p
    return len(payloads)


async def test_raw_history_holds_no_plaintext_of_the_inputs(
    codec_harness: RolloutHarness, codec_env: CodecEnv, codec_client: Client
) -> None:
    h = codec_harness
    name = f"enc-{uuid.uuid4().hex[:6]}"
    tag = f"codec{uuid.uuid4().hex[:8]}"
    put_model("laya", tag)
    model = f"laya:{tag}"
    h.create_dm(name, {"model": model, "replicas": 1})
    inp = h.input_for(name)
    handle = await h.start(inp)
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.result == RolloutResult.PROMOTED, outcome
    # A query through the codec, as `dmrollout status` and the controller ask.
    progress = await Rollouts(codec_client, h.task_queue).progress(handle.id)
    assert progress is not None

    history = await raw_history(codec_env, handle.id)
    text = searchable(json.dumps(_without(history, CLEAR_BY_DESIGN)))
    for plaintext in (model, tag, h.namespace, name, inp.dm.uid):
        assert plaintext not in text, f"{plaintext!r} in the raw history"
    # Inputs, results, heartbeats, activity summaries: every payload, with the key's ID.
    assert assert_all_payloads_encrypted(history) > 10
    # ...and the search would have found them had they been there: the codec client decodes.
    started = history["events"][0]["workflowExecutionStartedEventAttributes"]
    payload = json_format.ParseDict(started["input"]["payloads"][0], Payload())
    [decoded] = await codec_client.data_converter.decode([payload], [RolloutInput])
    assert decoded.revision.model == model and decoded.dm.namespace == h.namespace


async def test_failure_messages_are_encoded(
    codec_harness: RolloutHarness, codec_env: CodecEnv, codec_client: Client
) -> None:
    h = codec_harness
    missing = f"laya:gone{uuid.uuid4().hex[:8]}"
    h.create_dm("enc-missing", {"model": missing})
    handle = await h.start(h.input_for("enc-missing"))
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.result == RolloutResult.FAILED and outcome.reason == "ModelNotFound", outcome
    assert missing in (outcome.message or "")  # what the codec client reads back

    history = await raw_history(codec_env, handle.id)
    assert missing not in searchable(json.dumps(_without(history, CLEAR_BY_DESIGN)))
    failures = list(_failures(history))
    assert failures, "the failed resolve left no failure in the history"
    for f in failures:
        assert f["message"] == "Encoded failure", f
        assert not f.get("stackTrace"), f
        assert f.get("encodedAttributes"), f
    assert_all_payloads_encrypted(history)
    # The codec client reads the message back from the encoded attributes.
    failure = json_format.ParseDict(failures[0], Failure(), ignore_unknown_fields=True)
    error = await codec_client.data_converter.decode_failure(failure)
    assert missing in str(error)


def _proto_payload(j: dict[str, Any]) -> dict[str, Any]:
    from google.protobuf import json_format

    p = json_format.ParseDict(j, Payload())
    return {"metadata": dict(p.metadata), "data": p.data}


def _failure_bytes(j: dict[str, Any]) -> bytes:
    from google.protobuf import json_format

    return bytes(
        json_format.ParseDict(j, Failure(), ignore_unknown_fields=True).SerializeToString()
    )


async def test_the_controller_with_the_codec_on_rolls_out_encrypted(
    crd: LocalCluster,
    codec_env: CodecEnv,
    codec_client: Client,
    codec_queue: str,
    tmp_path: Path,
) -> None:
    """`dmrollout controller` given the same two variables as the worker: it starts the
    rollout (inputs and its static summary encrypted), queries and signals through the codec,
    and the DecisionModel reaches Ready."""
    h = RolloutHarness(crd, codec_client, codec_queue, f"codec-ctl-{uuid.uuid4().hex[:6]}")
    controller = ControllerProcess(
        crd,
        codec_env.temporal.address,
        codec_queue,
        tmp_path,
        health_port=18090,
        identity="codec-ctl",
        extra_args=("--watch-namespaces", h.namespace),
        # Its own Lease: the controller e2e tests' controller may run in the same session.
        extra_env={**codec_env.env, "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-codec"},
    )
    controller.start()
    try:
        tag = f"ctl{uuid.uuid4().hex[:8]}"
        put_model("laya", tag)
        h.create_dm("app", {"model": f"laya:{tag}", "replicas": 1})
        await eventually(lambda: h.status("app").get("phase") == "Ready", 120, what="Ready")
    finally:
        controller.stop()
    [wf] = [wf async for wf in codec_client.list_workflows(f'DmNamespace="{h.namespace}"')]
    history = await raw_history(codec_env, wf.id)
    text = searchable(json.dumps(_without(history, CLEAR_BY_DESIGN)))
    for plaintext in (tag, h.namespace, h.dm("app")["metadata"]["uid"]):
        assert plaintext not in text, f"{plaintext!r} in the raw history"
    assert_all_payloads_encrypted(history)
    # The static summary the controller sets is there, encrypted (the UI decodes it).
    started = history["events"][0]
    assert started["userMetadata"]["summary"]["metadata"]
