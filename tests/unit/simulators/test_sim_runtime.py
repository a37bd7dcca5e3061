from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from simulators.answers import answer_case, expected_accuracy, make_golden_set, pair_correct
from simulators.catalogue import ModelArtifact, ModelProfile

POD = "127.0.0.2"
KEY = "k3y-Secret"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHOICE = {"type": "choice", "criteria": {"billing": "money", "tech": "it broke"}}


def decision(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "laya:en", "state": "my invoice is wrong", "questions": {}}
    body["questions"] = {"team": CHOICE}
    body.update(overrides)
    return body


async def test_root_version_and_unknown_pod(runtime: Any, http: httpx.AsyncClient) -> None:
    runtime.add_pod(POD, env={"OLLAYA_API_KEY": KEY})
    root = await http.get(runtime.url(POD, "/"))
    assert root.status_code == 200 and root.text == "Ollaya is running"
    assert root.headers["Content-Type"].startswith("text/plain")
    head = await http.head(runtime.url(POD, "/"))
    assert head.status_code == 200
    version = await http.get(runtime.url(POD, "/api/version"), headers=AUTH)
    assert version.json() == {"version": "0.10.0"}
    unknown = await http.get(runtime.url("127.0.0.99", "/"))
    assert unknown.status_code == 503 and unknown.json()["code"] == "POD_UNKNOWN"
    missing = await http.get(runtime.url(POD, "/api/nothing"), headers=AUTH)
    assert missing.status_code == 404 and missing.json()["code"] == "NOT_FOUND"
    wrong_method = await http.get(runtime.url(POD, "/v1/systemone"), headers=AUTH)
    assert wrong_method.status_code == 405 and wrong_method.json()["code"] == "METHOD_NOT_ALLOWED"


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        (f"Bearer {KEY}", True),
        (f"bearer {KEY}", True),
        (f"BEARER {KEY}", True),
        (f"Bearer {KEY.lower()}", False),
        (f"Bearer {KEY}x", False),
        ("Bearer", False),
        (f"Basic {KEY}", False),
        (KEY, False),
        (None, False),
    ],
)
async def test_auth(runtime: Any, http: httpx.AsyncClient, header: str | None, ok: bool) -> None:
    runtime.add_pod(POD, env={"OLLAYA_API_KEY": KEY})
    headers = {"Authorization": header} if header is not None else {}
    for method, path in (("GET", "/api/ps"), ("GET", "/api/version"), ("POST", "/api/decide")):
        response = await http.request(method, runtime.url(POD, path), headers=headers, json={})
        if ok:
            assert response.status_code != 401
        else:
            assert response.status_code == 401
            assert response.headers["WWW-Authenticate"] == "Bearer"
            assert response.json()["code"] == "UNAUTHORIZED"


async def test_no_key_means_no_auth(runtime: Any, http: httpx.AsyncClient) -> None:
    runtime.add_pod(POD)
    assert (await http.get(runtime.url(POD, "/api/ps"))).json() == {"models": []}


async def test_unauthorized_fault(runtime: Any, http: httpx.AsyncClient) -> None:
    runtime.add_pod(POD, env={"OLLAYA_API_KEY": KEY})
    runtime.update_pod(POD, annotations={"sim.dmrollout.dev/unauthorized": "true"})
    assert (await http.get(runtime.url(POD, "/api/ps"), headers=AUTH)).status_code == 401
    assert (await http.get(runtime.url(POD, "/"))).status_code == 200
    runtime.update_pod(POD, annotations={})
    assert (await http.get(runtime.url(POD, "/api/ps"), headers=AUTH)).status_code == 200


async def test_body_cap(runtime: Any, http: httpx.AsyncClient) -> None:
    runtime.add_pod(POD)
    big = b'{"model":"laya:en","state":"' + b"x" * (8 * 1024 * 1024) + b'"}'
    response = await http.post(runtime.url(POD, "/v1/systemone"), content=big)
    assert response.status_code == 413 and response.json()["code"] == "REQUEST_TOO_LARGE"

    async def chunks() -> Any:
        for _ in range(9):
            yield b"x" * (1024 * 1024)

    chunked = await http.post(runtime.url(POD, "/api/decide"), content=chunks())
    assert chunked.status_code == 413
    # Just under the cap is read (and then judged on content).
    under = json.dumps(decision(state="y" * (8 * 1024 * 1024 - 200))).encode()
    assert len(under) <= 8 * 1024 * 1024
    ok = await http.post(runtime.url(POD, "/v1/systemone"), content=under)
    assert ok.status_code == 404  # model not in the store


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (decision(state=5), ["body", "state"]),
        (decision(state=True), ["body", "state"]),
        (decision(state=None), ["body", "state"]),
        ({"model": "laya:en", "questions": {"q": CHOICE}}, ["body", "state"]),
        (decision(model=None), ["body", "model"]),
        (decision(questions={}), ["body", "questions"]),
        (decision(questions=[CHOICE]), ["body", "questions"]),
        (decision(questions={str(i): CHOICE for i in range(257)}), ["body", "questions"]),
        (decision(questions={"q": {"type": "rank"}}), ["body", "questions", "q", "type"]),
        (
            decision(questions={"q": {"type": "choice", "criteria": ["only"]}}),
            ["body", "questions", "q", "criteria"],
        ),
        (
            decision(
                questions={"q": {"type": "choice", "criteria": [f"l{i}" for i in range(256)]}}
            ),
            ["body", "questions", "q", "criteria"],
        ),
        (
            decision(questions={"q": {"type": "choice", "criteria": ["a", "a"]}}),
            ["body", "questions", "q", "criteria"],
        ),
        (
            decision(questions={"q": {"type": "score", "criteria": [str(i) for i in range(11)]}}),
            ["body", "questions", "q", "criteria"],
        ),
        (
            decision(questions={"q": {"type": "score", "criteria": {"0": "a", "1": "b"}}}),
            ["body", "questions", "q", "criteria"],
        ),
        (
            decision(questions={"q": {"type": "noul", "criteria": "yes"}}),
            ["body", "questions", "q", "criteria"],
        ),
        (decision(questions={"q": "what?"}), ["body", "questions", "q"]),
        ([1, 2], ["body"]),
    ],
)
async def test_validation_422(
    runtime: Any, http: httpx.AsyncClient, body: Any, loc: list[Any]
) -> None:
    runtime.add_pod(POD)
    response = await http.post(runtime.url(POD, "/v1/systemone"), json=body)
    assert response.status_code == 422
    payload = response.json()
    assert payload["code"] == "VALIDATION_ERROR" and payload["error"]
    assert loc in [item["loc"] for item in payload["detail"]]


async def test_limits_accepted(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD)
    stored(pod.store_dir)
    questions: dict[str, Any] = {str(i): {"type": "noul"} for i in range(254)}
    questions["c"] = {"type": "choice", "criteria": [f"l{i}" for i in range(255)]}
    questions["s"] = {"type": "score", "criteria": [str(i) for i in range(10)]}
    response = await http.post(
        runtime.url(POD, "/v1/systemone"), json=decision(questions=questions, state=[1, "a"])
    )
    assert response.status_code == 200
    assert len(response.json()["answers"]) == 256


async def test_bad_json_and_bad_names(runtime: Any, http: httpx.AsyncClient) -> None:
    runtime.add_pod(POD)
    bad = await http.post(runtime.url(POD, "/v1/systemone"), content=b"{nope")
    assert bad.status_code == 400 and bad.json()["code"] == "BAD_REQUEST"
    name = await http.post(runtime.url(POD, "/v1/systemone"), json=decision(model="a/b/c/d:e"))
    assert name.status_code == 400 and name.json()["code"] == "INVALID_MODEL_NAME"
    keep = await http.post(
        runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": "soon"}
    )
    assert keep.status_code == 400


async def test_load_pin_and_ps(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, env={"OLLAYA_API_KEY": KEY})
    artifact = stored(pod.store_dir, profile=ModelProfile(size=845897529, family="laya"))
    load = await http.post(
        runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": -1}, headers=AUTH
    )
    assert load.status_code == 200
    body = load.json()
    assert body["done_reason"] == "load" and body["answers"] == {}
    assert isinstance(body["load_duration"], int) and body["load_duration"] > 0
    assert body["created_at"] == "2030-01-02T03:04:05.000000Z"
    ps = (await http.get(runtime.url(POD, "/api/ps"), headers=AUTH)).json()
    assert ps == {
        "models": [
            {
                "name": "laya:en",
                "model": "laya:en",
                "size": 845897529,
                "digest": artifact.digest,
                "details": {
                    "format": "onnx",
                    "family": "laya",
                    "parameter_size": "421M",
                    "quantization_level": "F32",
                },
                "expires_at": None,
                "size_vram": 0,
                "context_length": 512,
                "device": "cpu",
            }
        ]
    }
    # Decisions leave the pin alone; an explicit keep_alive replaces it.
    await http.post(runtime.url(POD, "/v1/systemone"), json=decision(), headers=AUTH)
    ps = (await http.get(runtime.url(POD, "/api/ps"), headers=AUTH)).json()
    assert ps["models"][0]["expires_at"] is None
    await http.post(
        runtime.url(POD, "/api/decide"),
        json={"model": "laya:en", "keep_alive": "10m"},
        headers=AUTH,
    )
    ps = (await http.get(runtime.url(POD, "/api/ps"), headers=AUTH)).json()
    assert ps["models"][0]["expires_at"] == "2030-01-02T03:14:05.000000Z"


async def test_keep_alive_expiry_and_unload(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, env={"OLLAYA_KEEP_ALIVE": "2m"})
    stored(pod.store_dir)
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    ps = (await http.get(runtime.url(POD, "/api/ps"))).json()
    assert ps["models"][0]["expires_at"] == "2030-01-02T03:06:05.000000Z"
    runtime.clock.advance(60)
    # Use refreshes an expiring model's keep-alive.
    await http.post(runtime.url(POD, "/v1/systemone"), json=decision())
    ps = (await http.get(runtime.url(POD, "/api/ps"))).json()
    assert ps["models"][0]["expires_at"] == "2030-01-02T03:07:05.000000Z"
    runtime.clock.advance(120)
    assert (await http.get(runtime.url(POD, "/api/ps"))).json() == {"models": []}
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": -1})
    unload = await http.post(
        runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": 0}
    )
    assert unload.status_code == 200 and unload.json()["done_reason"] == "unload"
    assert (await http.get(runtime.url(POD, "/api/ps"))).json() == {"models": []}


async def test_default_keep_alive_pin_from_env(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, env={"OLLAYA_KEEP_ALIVE": "-1"})
    stored(pod.store_dir)
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    ps = (await http.get(runtime.url(POD, "/api/ps"))).json()
    assert ps["models"][0]["expires_at"] is None


async def test_model_not_in_store(runtime: Any, http: httpx.AsyncClient) -> None:
    runtime.add_pod(POD)
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert load.status_code == 404 and load.json()["code"] == "MODEL_NOT_FOUND"
    runtime.add_pod("127.0.0.3", store_dir=None)
    load = await http.post(runtime.url("127.0.0.3", "/api/decide"), json={"model": "laya:en"})
    assert load.status_code == 404


async def test_registry_env_picks_the_store_host(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, env={"OLLAYA_REGISTRY": "http://127.0.0.1:5000"})
    stored(pod.store_dir)  # under ollaya.dev: not where this Pod looks
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert load.status_code == 404
    mirrored = stored(pod.store_dir, host="127.0.0.1:5000", profile=ModelProfile(revision="m"))
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert load.status_code == 200
    ps = (await http.get(runtime.url(POD, "/api/ps"))).json()
    assert ps["models"][0]["digest"] == mirrored.digest


@pytest.mark.parametrize(
    ("device", "gpu", "reported", "ok"),
    [
        (None, False, "cpu", True),
        ("auto", True, "cuda:0", True),
        ("cpu", True, "cpu", True),
        ("cuda", True, "cuda:0", True),
        ("cuda:1", True, "cuda:1", True),
        ("cuda", False, None, False),
        ("cuda:0", False, None, False),
        ("metal", True, None, False),
    ],
)
async def test_devices(
    runtime: Any,
    http: httpx.AsyncClient,
    stored: Callable[..., ModelArtifact],
    device: str | None,
    gpu: bool,
    reported: str | None,
    ok: bool,
) -> None:
    env = {"OLLAYA_DEVICE": device} if device else {}
    pod = runtime.add_pod(POD, env=env, node_has_gpu=gpu)
    stored(pod.store_dir, profile=ModelProfile(size=1000))
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    if not ok:
        assert load.status_code == 500 and load.json()["code"] == "MODEL_LOAD_FAILED"
        assert (await http.get(runtime.url(POD, "/api/ps"))).json() == {"models": []}
        return
    assert load.status_code == 200
    entry = (await http.get(runtime.url(POD, "/api/ps"))).json()["models"][0]
    assert entry["device"] == reported
    assert entry["size_vram"] == (1000 if reported and reported.startswith("cuda") else 0)


async def test_state_is_per_pod_uid(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD)
    other = runtime.add_pod("127.0.0.3")
    stored(pod.store_dir)
    stored(other.store_dir)
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": -1})
    assert len((await http.get(runtime.url(POD, "/api/ps"))).json()["models"]) == 1
    assert (await http.get(runtime.url("127.0.0.3", "/api/ps"))).json() == {"models": []}
    # The same IP reused by a new Pod (new UID) starts empty.
    runtime.update_pod(POD, uid="uid-new")
    assert (await http.get(runtime.url(POD, "/api/ps"))).json() == {"models": []}


async def test_answers_match_the_truth_functions(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD)
    profile = ModelProfile(accuracy=0.75, confidence=0.85)
    stored(pod.store_dir, profile=profile)
    case = make_golden_set(1, seed=11)[0]
    body = {"model": "laya:en", "state": case["state"], "questions": case["questions"]}
    response = await http.post(runtime.url(POD, "/v1/systemone"), json=body)
    assert response.status_code == 200
    payload = response.json()
    assert payload["model"] == "laya:en"
    assert payload["answers"] == answer_case(case, 0.75, 0.85)
    assert payload["usage"]["output_tokens"] == 0 and payload["usage"]["input_tokens"] > 0
    again = await http.post(runtime.url(POD, "/v1/decisions"), json=body)
    assert again.json()["answers"] == payload["answers"]
    via_decide = await http.post(runtime.url(POD, "/api/decide"), json=body)
    assert via_decide.json()["answers"] == payload["answers"]
    assert via_decide.json()["done_reason"] == "stop"
    score = payload["answers"]["q_score"]
    assert score["score"] == round(sum(int(k) * p for k, p in score["probabilities"].items()), 4)
    assert "confidence" not in payload["answers"]["q_noul"]


async def test_golden_accuracy_over_http_matches_expected_accuracy(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    cases = make_golden_set(40, seed=5)
    scored: dict[str, float] = {}
    for index, (ip, accuracy) in enumerate((("127.0.0.2", 0.9), ("127.0.0.3", 0.6))):
        pod = runtime.add_pod(ip)
        stored(pod.store_dir, profile=ModelProfile(accuracy=accuracy, revision=str(index)))
        correct = total = 0
        for case in cases:
            body = {"model": "laya:en", "state": case["state"], "questions": case["questions"]}
            answers = (await http.post(runtime.url(ip, "/v1/systemone"), json=body)).json()
            for qid, expected in case["expected"].items():
                total += 1
                correct += pair_correct(
                    case["questions"][qid],
                    expected,
                    answers["answers"].get(qid),
                    case["tolerance"].get(qid),
                )
        scored[ip] = correct / total
        assert scored[ip] == expected_accuracy(cases, accuracy)
    assert scored["127.0.0.2"] > scored["127.0.0.3"]


async def test_queue_full_with_small_queue(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(
        POD,
        env={"OLLAYA_MAX_QUEUE": "2"},
        # Long enough that all five requests arrive while the first is still in its pass.
        annotations={"sim.dmrollout.dev/latency-ms": "300"},
    )
    stored(pod.store_dir)
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    responses = await asyncio.gather(
        *(http.post(runtime.url(POD, "/v1/systemone"), json=decision()) for _ in range(5))
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 200, 503, 503, 503]
    busy = next(r for r in responses if r.status_code == 503)
    assert busy.json()["code"] == "QUEUE_FULL" and busy.headers["Retry-After"] == "1"
    # Once drained, the queue admits again.
    assert (await http.post(runtime.url(POD, "/v1/systemone"), json=decision())).status_code == 200


async def test_max_queue_annotation_overrides_env(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(
        POD,
        env={"OLLAYA_MAX_QUEUE": "100"},
        annotations={"sim.dmrollout.dev/latency-ms": "300", "sim.dmrollout.dev/max-queue": "1"},
    )
    stored(pod.store_dir)
    responses = await asyncio.gather(
        *(http.post(runtime.url(POD, "/v1/systemone"), json=decision()) for _ in range(3))
    )
    assert sorted(r.status_code for r in responses) == [200, 503, 503]


async def test_forward_passes_are_serialised_per_model(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, annotations={"sim.dmrollout.dev/latency-ms": "100"})
    stored(pod.store_dir)
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(
        *(http.post(runtime.url(POD, "/v1/systemone"), json=decision()) for _ in range(3))
    )
    assert loop.time() - started >= 0.3


async def test_queue_full_burst(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, annotations={"sim.dmrollout.dev/queue-full-burst": "2"})
    stored(pod.store_dir)
    codes = [
        (await http.post(runtime.url(POD, "/v1/systemone"), json=decision())).status_code
        for _ in range(4)
    ]
    assert codes == [503, 503, 200, 200]
    # Counted per Pod UID: a new Pod at the same IP gets its own burst.
    runtime.update_pod(POD, uid="uid-second")
    assert (await http.post(runtime.url(POD, "/v1/systemone"), json=decision())).status_code == 503


async def test_report_faults_toggle_on_a_live_pod(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, env={"OLLAYA_DEVICE": "cuda"}, node_has_gpu=True)
    artifact = stored(pod.store_dir)
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": -1})

    async def entry() -> dict[str, Any]:
        models = (await http.get(runtime.url(POD, "/api/ps"))).json()["models"]
        return models[0] if models else {}

    assert (await entry())["device"] == "cuda:0"
    runtime.update_pod(POD, annotations={"sim.dmrollout.dev/device": "cpu"})
    assert (await entry())["device"] == "cpu"
    runtime.update_pod(POD, annotations={"sim.dmrollout.dev/digest": "f" * 64})
    assert (await entry())["digest"] == "f" * 64
    runtime.update_pod(POD, annotations={"sim.dmrollout.dev/never-pin": "true"})
    assert (await entry())["expires_at"] == "2030-01-02T03:09:05.000000Z"
    runtime.update_pod(POD, annotations={"sim.dmrollout.dev/lose-model": "true"})
    assert await entry() == {}
    lost = await http.post(runtime.url(POD, "/v1/systemone"), json=decision())
    assert lost.status_code == 404 and lost.json()["code"] == "MODEL_NOT_FOUND"
    runtime.update_pod(POD, annotations={})
    restored = await entry()
    assert restored["digest"] == artifact.digest and restored["expires_at"] is None
    assert restored["device"] == "cuda:0"


async def test_device_annotation_is_a_silent_cpu_fallback(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(
        POD,
        env={"OLLAYA_DEVICE": "cuda"},
        node_has_gpu=False,
        annotations={"sim.dmrollout.dev/device": "cpu"},
    )
    stored(pod.store_dir)
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert load.status_code == 200
    entry = (await http.get(runtime.url(POD, "/api/ps"))).json()["models"][0]
    assert entry["device"] == "cpu"


async def test_a_model_loaded_under_a_device_fault_reports_its_own_device_once_removed(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    """Report-time, as documented (explorer seeds 8016, 8020: a stable Pod restored while the
    fault was on reported it after the fault was removed, and never became model-ready)."""
    pod = runtime.add_pod(
        POD,
        env={"OLLAYA_DEVICE": "cuda"},
        node_has_gpu=True,
        annotations={"sim.dmrollout.dev/device": "cpu-fallback"},
    )
    stored(pod.store_dir)
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert load.status_code == 200

    async def device() -> str:
        return str((await http.get(runtime.url(POD, "/api/ps"))).json()["models"][0]["device"])

    assert await device() == "cpu-fallback"
    runtime.update_pod(POD, annotations={})
    assert await device() == "cuda:0"


async def test_load_faults(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, annotations={"sim.dmrollout.dev/load-fails": "true"})
    stored(pod.store_dir)
    failed = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert failed.status_code == 500 and failed.json()["code"] == "MODEL_LOAD_FAILED"
    implicit = await http.post(runtime.url(POD, "/v1/systemone"), json=decision())
    assert implicit.status_code == 500
    runtime.update_pod(POD, annotations={"sim.dmrollout.dev/load-delay-seconds": "0.2"})
    slow = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert slow.status_code == 200 and slow.json()["load_duration"] >= 200_000_000
    runtime.update_pod(
        POD,
        env={"OLLAYA_LOAD_TIMEOUT": "100ms"},
        annotations={"sim.dmrollout.dev/load-delay-seconds": "5"},
        uid="uid-fresh",
    )
    timed_out = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert timed_out.status_code == 500 and "timed out" in timed_out.json()["error"]


async def test_lost_model_blocks_loads(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD, annotations={"sim.dmrollout.dev/lose-model": "true"})
    stored(pod.store_dir)
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert load.status_code == 404


async def test_loaded_digest_stays_until_reload(
    runtime: Any, http: httpx.AsyncClient, stored: Callable[..., ModelArtifact]
) -> None:
    pod = runtime.add_pod(POD)
    first = stored(pod.store_dir, profile=ModelProfile(accuracy=1.0))
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": -1})
    second = stored(pod.store_dir, profile=ModelProfile(accuracy=0.0))
    ps = (await http.get(runtime.url(POD, "/api/ps"))).json()
    assert ps["models"][0]["digest"] == first.digest
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": 0})
    await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en", "keep_alive": -1})
    ps = (await http.get(runtime.url(POD, "/api/ps"))).json()
    assert ps["models"][0]["digest"] == second.digest


@pytest.mark.parametrize(
    ("name", "env"),
    [
        # As dmrollout runs them: OLLAYA_REGISTRY on the Pod for host-less names only.
        ("laya:en", {"OLLAYA_REGISTRY": "http://127.0.0.1:5000"}),
        ("http://127.0.0.1:5000/library/laya:en", {}),
        ("127.0.0.1:5000/library/laya:en", {}),
        # A named host ignores OLLAYA_REGISTRY, scheme or not.
        ("HTTP://127.0.0.1:5000/library/laya:en", {"OLLAYA_REGISTRY": "https://ollaya.dev"}),
        ("127.0.0.1:5000/library/laya:en", {"OLLAYA_REGISTRY": "http://127.0.0.1:5000"}),
    ],
)
async def test_every_form_of_a_host_loads_from_its_store_directory(
    runtime: Any,
    http: httpx.AsyncClient,
    stored: Callable[..., ModelArtifact],
    name: str,
    env: dict[str, str],
) -> None:
    # RUNTIME_API.md: a host may carry http:// or https://; the store is keyed by host only.
    pod = runtime.add_pod(POD, env=env)
    artifact = stored(pod.store_dir, host="127.0.0.1:5000")
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": name, "keep_alive": -1})
    assert load.status_code == 200, load.text
    assert load.json()["done_reason"] == "load"
    (entry,) = (await http.get(runtime.url(POD, "/api/ps"))).json()["models"]
    assert entry["name"] == name.lower() and entry["digest"] == artifact.digest
    answer = await http.post(runtime.url(POD, "/v1/systemone"), json=decision(model=name))
    assert answer.status_code == 200, answer.text
