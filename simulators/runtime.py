"""The Ollaya runtime simulator: one process answering for every simulated Pod.

It listens on 0.0.0.0:11435 inside the network namespace where each Pod IP is a local address,
tells Pods apart by the local address a request was sent to, and looks the Pod up in a
`PodDirectory` (its env, node GPU, store volume and fault annotations, see
simulators.pod_faults). Behaviour follows /work/shared/RUNTIME_API.md:

- `GET`/`HEAD /` 200 `Ollaya is running`, no auth; `GET /api/version`.
- Auth when the Pod's env has OLLAYA_API_KEY: `Authorization: Bearer <key>` (scheme case-
  insensitive), else 401 UNAUTHORIZED with `WWW-Authenticate: Bearer`.
- `POST /api/decide` without `state` loads (`keep_alive` absent → OLLAYA_KEEP_ALIVE or 5m; > 0
  → expires; < 0 → pinned) or unloads (`keep_alive: 0`); with `state` it decides like
  `/v1/systemone`. A load reads the manifest from the Pod's store (404 MODEL_NOT_FOUND when
  absent) and fails with 500 MODEL_LOAD_FAILED when OLLAYA_DEVICE asks for cuda on a node
  without GPU.
- `GET /api/ps`: loaded models of this Pod (state per Pod UID; expired ones are evicted).
- `POST /v1/systemone` (alias `/v1/decisions`): a decision. A model not in memory is loaded
  implicitly from the store (Ollama does the same; nothing is ever pulled implicitly). Using a
  model refreshes an expiring model's keep-alive and leaves a pinned one pinned unless the
  request sets `keep_alive`. Answers come from simulators.answers with the model's profile.
- `POST /api/pull`: simulators.pull.
- At most OLLAYA_MAX_QUEUE (512) decisions in flight per Pod, then 503 QUEUE_FULL with
  Retry-After: 1; one forward pass at a time per model.

Run: `python -m simulators.runtime --host 0.0.0.0 --port 11435 --state-dir DIR --kubeconfig PATH`.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from simulators.decisions import (
    DecisionRequest,
    decision_answers,
    input_tokens,
    parse_decision_request,
)
from simulators.keep_alive import (
    DEFAULT_KEEP_ALIVE,
    DEFAULT_LOAD_TIMEOUT,
    keep_alive_seconds,
    parse_duration,
)
from simulators.model_names import InvalidModelName, ModelRef, display_name, parse_model_name
from simulators.pod_faults import PodFaults
from simulators.pods import PodDirectory, SimPod
from simulators.pull import handle_pull
from simulators.runtime_state import LoadedModel, PodRuntime, RuntimeState
from simulators.store import StoreError, read_stored_model
from simulators.wire import (
    ApiError,
    detail_item,
    error_middleware,
    read_json,
    rfc3339,
    validation_error,
)

VERSION = "0.10.0"
DEFAULT_MAX_QUEUE = 512
DEFAULT_PORT = 11435

Clock = Callable[[], datetime]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

POD = web.RequestKey("simulated_pod", SimPod)
FAULTS = web.RequestKey("simulated_pod_faults", PodFaults)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _local_ip(request: web.Request) -> str:
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    ip = str(sockname[0]) if sockname else ""
    # A dual-stack listener sees IPv4 Pod addresses as IPv4-mapped IPv6.
    return ip.removeprefix("::ffff:")


def resolve_device(setting: str | None, node_has_gpu: bool) -> str:
    """The device a load ends up on; ValueError when it cannot load there."""
    value = (setting or "auto").strip().lower()
    if value == "auto":
        return "cuda:0" if node_has_gpu else "cpu"
    if value == "cpu":
        return "cpu"
    if value == "cuda" or (value.startswith("cuda:") and value[5:].isdigit()):
        if not node_has_gpu:
            raise ValueError(f"device {value}: no CUDA device available")
        return "cuda:0" if value == "cuda" else value
    raise ValueError(f"device {value}: not available on this platform")


class RuntimeSimulator:
    def __init__(self, directory: PodDirectory, clock: Clock | None = None) -> None:
        self.directory = directory
        self.clock: Clock = clock or _utcnow
        self.state = RuntimeState()
        self._session: aiohttp.ClientSession | None = None

    # -- plumbing -----------------------------------------------------------------------------

    async def client_session(self, app: web.Application) -> AsyncIterator[None]:
        self._session = aiohttp.ClientSession()
        yield
        await self._session.close()

    @web.middleware
    async def pod_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        ip = _local_ip(request)
        pod = await self.directory.lookup(ip)
        if pod is None:
            raise ApiError(503, f"no simulated Pod has IP {ip}", "POD_UNKNOWN")
        faults = PodFaults.from_annotations(pod.annotations)
        request[POD] = pod
        request[FAULTS] = faults
        if request.path != "/" or request.method not in {"GET", "HEAD"}:
            self._authorize(request, pod, faults)
        return await handler(request)

    @staticmethod
    def _authorize(request: web.Request, pod: SimPod, faults: PodFaults) -> None:
        key = pod.env.get("OLLAYA_API_KEY", "")
        if not key and not faults.unauthorized:
            return
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        good = scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), key.encode())
        if faults.unauthorized or not good:
            raise ApiError(
                401,
                "unauthorized",
                "UNAUTHORIZED",
                headers={"WWW-Authenticate": "Bearer"},
            )

    # -- loading ------------------------------------------------------------------------------

    def _ref(self, pod: SimPod, name: str) -> ModelRef:
        try:
            return parse_model_name(name, pod.env.get("OLLAYA_REGISTRY"))
        except InvalidModelName as exc:
            raise ApiError(400, str(exc), "INVALID_MODEL_NAME") from exc

    @staticmethod
    def _keep_alive(pod: SimPod, value: Any) -> float:
        try:
            return keep_alive_seconds(value, pod.env.get("OLLAYA_KEEP_ALIVE"))
        except ValueError as exc:
            raise ApiError(400, f"keep_alive: {exc}", "BAD_REQUEST") from exc

    @staticmethod
    def _expiry(seconds: float, now: datetime) -> datetime | None:
        return None if seconds < 0 else now + timedelta(seconds=seconds)

    @staticmethod
    def _load_timeout(pod: SimPod) -> float:
        try:
            return parse_duration(pod.env.get("OLLAYA_LOAD_TIMEOUT", DEFAULT_LOAD_TIMEOUT))
        except ValueError:
            return parse_duration(DEFAULT_LOAD_TIMEOUT)

    async def ensure_loaded(
        self,
        pod: SimPod,
        faults: PodFaults,
        name: str,
        keep_alive: Any,
        *,
        explicit: bool,
    ) -> tuple[LoadedModel, int]:
        """The model in memory (loading it from the store if needed) and the load time in ns."""
        ref = self._ref(pod, name)
        seconds = self._keep_alive(pod, keep_alive)
        runtime = self.state.pod(pod.uid)
        if faults.lose_model:
            raise ApiError(404, f"model '{name}' not found", "MODEL_NOT_FOUND")
        async with runtime.load_lock(ref.key):
            now = self.clock()
            runtime.evict_expired(now)
            existing = runtime.models.get(ref.key)
            if existing is not None:
                # Use keeps an expiring model alive; only an explicit keep_alive or an explicit
                # load changes a pin, so the evaluator's traffic does not unpin a warmed Pod.
                if explicit or keep_alive is not None or existing.expires_at is not None:
                    existing.expires_at = self._expiry(seconds, now)
                return existing, 0
            started = time.perf_counter_ns()
            loaded = await self._load(pod, faults, ref, name)
            loaded.expires_at = self._expiry(seconds, self.clock())
            runtime.models[ref.key] = loaded
            return loaded, time.perf_counter_ns() - started

    async def _load(self, pod: SimPod, faults: PodFaults, ref: ModelRef, name: str) -> LoadedModel:
        try:
            stored = read_stored_model(pod.store_dir, ref)
        except StoreError as exc:
            raise ApiError(500, f"load model: {exc}", "MODEL_LOAD_FAILED") from exc
        if stored is None:
            raise ApiError(
                404, f"model '{name}' not found, try pulling it first", "MODEL_NOT_FOUND"
            )
        if faults.load_fails:
            raise ApiError(500, f"load model '{name}': simulated failure", "MODEL_LOAD_FAILED")
        try:
            device = resolve_device(pod.env.get("OLLAYA_DEVICE"), pod.node_has_gpu)
        except ValueError as exc:
            if faults.device is None:
                raise ApiError(500, f"load model '{name}': {exc}", "MODEL_LOAD_FAILED") from exc
            # The silent fallback is where the model really went: no device it asked for is
            # there, so it stays on the fault's device when the fault is removed.
            device = faults.device
        # Otherwise the model keeps its own device, and the fault is applied when /api/ps
        # answers (report-time, pod_faults): removing it restores the true device at once
        # (explorer seeds 8016, 8020: a model loaded under the fault reported it for ever).
        if faults.load_delay_seconds > 0:
            timeout = self._load_timeout(pod)
            if faults.load_delay_seconds > timeout > 0:
                await asyncio.sleep(timeout)
                raise ApiError(
                    500, f"load model '{name}': timed out after {timeout:g}s", "MODEL_LOAD_FAILED"
                )
            await asyncio.sleep(faults.load_delay_seconds)
        now = self.clock()
        return LoadedModel(
            key=ref.key,
            name=display_name(name),
            digest=stored.digest,
            profile=stored.profile,
            device=device,
            loaded_at=now,
            expires_at=None,
        )

    # -- handlers -----------------------------------------------------------------------------

    async def root(self, request: web.Request) -> web.Response:
        return web.Response(text="Ollaya is running", content_type="text/plain")

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VERSION})

    async def decide(self, request: web.Request) -> web.Response:
        pod, faults = request[POD], request[FAULTS]
        body = await read_json(request)
        if isinstance(body, dict) and body.get("state") is not None:
            return await self._decision(request, body, done_reason="stop")
        if not isinstance(body, dict):
            raise validation_error([detail_item(["body"], "body must be an object", "type_error")])
        name = body.get("model")
        if not isinstance(name, str) or not name.strip():
            raise validation_error([detail_item(["body", "model"], "model is required", "missing")])
        created = rfc3339(self.clock())
        keep_alive = body.get("keep_alive")
        if keep_alive is not None and self._keep_alive(pod, keep_alive) == 0:
            ref = self._ref(pod, name)
            self.state.pod(pod.uid).models.pop(ref.key, None)
            return web.json_response(
                {
                    "model": name,
                    "created_at": created,
                    "answers": {},
                    "done": True,
                    "done_reason": "unload",
                }
            )
        started = time.perf_counter_ns()
        _, load_ns = await self.ensure_loaded(pod, faults, name, keep_alive, explicit=True)
        return web.json_response(
            {
                "model": name,
                "created_at": created,
                "answers": {},
                "done": True,
                "done_reason": "load",
                "load_duration": load_ns,
                "total_duration": time.perf_counter_ns() - started,
            }
        )

    async def systemone(self, request: web.Request) -> web.Response:
        return await self._decision(request, await read_json(request), done_reason=None)

    def _admit(self, runtime: PodRuntime, pod: SimPod, faults: PodFaults) -> None:
        busy = ApiError(503, "server busy, queue full", "QUEUE_FULL", headers={"Retry-After": "1"})
        if runtime.burst_rejected < faults.queue_full_burst:
            runtime.burst_rejected += 1
            raise busy
        limit = faults.max_queue
        if limit is None:
            try:
                limit = int(pod.env.get("OLLAYA_MAX_QUEUE", DEFAULT_MAX_QUEUE))
            except ValueError:
                limit = DEFAULT_MAX_QUEUE
        if runtime.in_flight >= limit:
            raise busy

    async def _decision(
        self, request: web.Request, body: Any, *, done_reason: str | None
    ) -> web.Response:
        pod, faults = request[POD], request[FAULTS]
        runtime = self.state.pod(pod.uid)
        self._admit(runtime, pod, faults)
        runtime.in_flight += 1
        try:
            started = time.perf_counter_ns()
            decision = parse_decision_request(body)
            loaded, load_ns = await self.ensure_loaded(
                pod, faults, decision.model, decision.keep_alive, explicit=False
            )
            async with runtime.model_lock(loaded.key):
                if faults.latency_ms > 0:
                    await asyncio.sleep(faults.latency_ms / 1000)
                answers = decision_answers(
                    decision, loaded.profile.accuracy_for(decision.state), loaded.profile.confidence
                )
            return web.json_response(
                self._decision_body(decision, answers, started, load_ns, done_reason)
            )
        finally:
            runtime.in_flight -= 1

    def _decision_body(
        self,
        decision: DecisionRequest,
        answers: dict[str, Any],
        started: int,
        load_ns: int,
        done_reason: str | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": decision.model,
            "created_at": rfc3339(self.clock()),
            "answers": answers,
            "usage": {"input_tokens": input_tokens(decision), "output_tokens": 0},
            "load_duration": load_ns,
            "total_duration": time.perf_counter_ns() - started,
        }
        if done_reason is not None:
            body["done"] = True
            body["done_reason"] = done_reason
        return body

    async def ps(self, request: web.Request) -> web.Response:
        pod, faults = request[POD], request[FAULTS]
        runtime = self.state.pod(pod.uid)
        now = self.clock()
        runtime.evict_expired(now)
        if faults.lose_model:
            return web.json_response({"models": []})
        models = [self._ps_entry(pod, faults, m, now) for m in runtime.models.values()]
        return web.json_response({"models": models})

    def _ps_entry(
        self, pod: SimPod, faults: PodFaults, model: LoadedModel, now: datetime
    ) -> dict[str, Any]:
        device = faults.device or model.device
        expires_at = model.expires_at
        if faults.never_pin and expires_at is None:
            seconds = self._keep_alive(pod, None)
            if seconds <= 0:
                seconds = parse_duration(DEFAULT_KEEP_ALIVE)
            expires_at = now + timedelta(seconds=seconds)
        profile = model.profile
        return {
            "name": model.name,
            "model": model.name,
            "size": profile.size,
            "digest": faults.digest or model.digest,
            "details": profile.details(),
            "expires_at": rfc3339(expires_at) if expires_at is not None else None,
            "size_vram": profile.size if device.startswith("cuda") else 0,
            "context_length": profile.context_length,
            "device": device,
        }

    async def pull(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        assert self._session is not None, "client session starts with the app"
        return await handle_pull(request, request[POD], self._session, body)


SIMULATOR = web.AppKey("runtime_simulator", RuntimeSimulator)


def make_app(directory: PodDirectory, *, clock: Clock | None = None) -> web.Application:
    """The runtime simulator as an aiohttp app (tests run it in-process)."""
    simulator = RuntimeSimulator(directory, clock)
    # The 8 MiB cap is enforced by wire.read_body with the contract's error body; aiohttp's own
    # limit is set above it so it never answers first.
    app = web.Application(
        middlewares=[error_middleware, simulator.pod_middleware],
        client_max_size=64 * 1024 * 1024,
    )
    app[SIMULATOR] = simulator
    app.cleanup_ctx.append(simulator.client_session)
    app.router.add_get("/", simulator.root)
    app.router.add_get("/api/version", simulator.version)
    app.router.add_post("/api/decide", simulator.decide)
    app.router.add_get("/api/ps", simulator.ps)
    app.router.add_post("/v1/systemone", simulator.systemone)
    app.router.add_post("/v1/decisions", simulator.systemone)
    app.router.add_post("/api/pull", simulator.pull)
    return app


def main(argv: list[str] | None = None) -> None:
    from simulators.kube_pods import KubePodDirectory
    from simulators.serve import serve_until_signal

    parser = argparse.ArgumentParser(prog="python -m simulators.runtime", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--kubeconfig", default=None, help="default: KUBECONFIG or in-cluster")
    parser.add_argument("--ready-file", type=Path, default=None)
    args = parser.parse_args(argv)
    directory = KubePodDirectory(args.state_dir, kubeconfig=args.kubeconfig, follow=True)
    app = make_app(directory)
    asyncio.run(serve_until_signal(app, args.host, args.port, ready_file=args.ready_file))


if __name__ == "__main__":
    main()
