"""Client of the Ollaya runtime on a serving Pod, and the readiness-gate verdict.

Calls go straight to ``http://<podIP>:11435`` with ``trust_env=False``: they carry the API key
(``Authorization: Bearer``), so they must never traverse a corporate proxy, and readiness must not
depend on the Pod CIDR being in ``NO_PROXY`` (seed 000: "only the registry client honours
HTTP(S)_PROXY"). The key is held privately and never appears in a message, repr or log.

The gate (REFERENCE.md "Readiness gate"): warmup ``POST /api/decide {"model", "keep_alive": -1}``
expecting ``done_reason: "load"``, then ``GET /api/ps``; ``verdict`` turns what was seen into
ModelReady or the first failing reason of DigestMismatch, DeviceMismatch, NotPinned, ProbeError.
A warmup the runtime refuses as malformed (a 4xx other than 401/404/408/429: in practice a model
name it does not accept) is RuntimeRequestRejected, permanent: the same Pods will refuse the same
name every round, so waiting for the starting deadline would only hide it.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from ipaddress import IPv6Address, ip_address
from types import TracebackType
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from decisionmodel.engine.api_key import KEY_RULE, header_safe
from decisionmodel.engine.http_tls import shared_tls_context
from decisionmodel.engine.names import DEFAULT_REGISTRY, parse_model_name
from decisionmodel.errors import (
    APIKeyInvalid,
    InvalidModelName,
    ProbeError,
    QueueFull,
    RuntimeAnswerInvalid,
    RuntimeRequestRejected,
)
from decisionmodel.vocabulary import Device, Reason

RUNTIME_PORT = 11435
# RUNTIME_API.md: request bodies are capped at 8 MiB; answers are far smaller, the same cap
# bounds what a misbehaving Pod can make the prober hold.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
# RUNTIME_API.md: the runtime's answer when a model does not load (500).
LOAD_FAILED_CODE = "MODEL_LOAD_FAILED"
# The runtime's QUEUE_FULL answer carries `Retry-After: 1` (RUNTIME_API.md "Concurrency").
DEFAULT_QUEUE_FULL_WAIT = 1.0
# Runtime error text quoted in a message is cut here: enough for "CUDA not available"-style
# load failures, too short to carry a payload back into Events.
_QUOTED_TEXT_LIMIT = 200
_CUDA_DEVICE_RE = re.compile(r"cuda:[0-9]+")
# 4xx answers that another attempt may get past: the key (401), a store still being filled
# (404), a slow server (408), a full queue (429). Any other 4xx refuses the request itself.
_RETRYABLE_4XX = frozenset({401, 404, 408, 429})

Sleep = Callable[[float], Awaitable[None]]


class PsDetails(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    format: str | None = None
    family: str | None = None
    parameter_size: str | None = None
    quantization_level: str | None = None


class PsModel(BaseModel):
    """One entry of ``GET /api/ps``. ``digest``, ``device`` and ``expires_at`` are required: the
    gate decides on them, and a missing ``expires_at`` must not read as pinned."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    model: str = ""
    size: int = 0
    digest: str
    details: PsDetails = Field(default_factory=PsDetails)
    expires_at: datetime | None
    size_vram: int = 0
    context_length: int | None = None
    device: str

    @field_validator("digest")
    @classmethod
    def _bare_digest(cls, value: str) -> str:
        # The runtime reports bare hex; tolerate a `sha256:` prefix from other builds.
        return value.strip().lower().removeprefix("sha256:")

    @property
    def pinned(self) -> bool:
        return self.expires_at is None


class WarmupResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    done_reason: str
    load_duration_ns: int | None = None


class GateVerdict(BaseModel):
    """The gate's answer for one Pod. ``precision`` is the loaded quantization level when known
    (recorded in the revision's status; the gate does not check it, seed 001 spike 007)."""

    model_config = ConfigDict(frozen=True)

    ready: bool
    reason: Reason  # one of vocabulary.GATE_REASONS
    message: str
    precision: str | None = None
    # The runtime did not answer (transport error, 401): a wait may fix it, unlike an answer
    # that shows the model lost or wrong.
    unanswered: bool = False
    # The runtime answered that it failed to load the model (500 MODEL_LOAD_FAILED).
    load_failed: bool = False


@dataclass(frozen=True)
class RuntimeTimeouts:
    """Seconds. ``warmup`` defaults to the runtime's own ``OLLAYA_LOAD_TIMEOUT`` (5m): loading a
    large model on CPU takes minutes; callers pass the rollout's starting timeout instead."""

    connect: float = 5.0
    inspect: float = 10.0
    warmup: float = 300.0
    decide: float = 30.0
    version: float = 10.0


def device_class(device: str) -> Device | None:
    """Class of a device the runtime reports: ``cpu``; only the exact ``cuda:<n>`` is cuda
    (RUNTIME_API.md); anything else (``metal``, a bare ``cuda``) is neither."""
    if device == Device.CPU:
        return Device.CPU
    if _CUDA_DEVICE_RE.fullmatch(device):
        return Device.CUDA
    return None


def _expected_class(device: str) -> Device | None:
    # spec.device is `cpu` or `cuda`; an operator-side `cuda:<n>` means the class too.
    return Device.CUDA if device == Device.CUDA else device_class(device)


def verdict(
    expected_digest: str,
    expected_device: str,
    ps_entry: PsModel | None,
    error: BaseException | None,
) -> GateVerdict:
    """Pure gate decision. Without an entry (the probe failed, or the model is not loaded) the
    verdict is ProbeError; with one, the first of digest, device class, pin that fails."""
    if error is not None:
        load_failed = getattr(error, "code", None) == LOAD_FAILED_CODE
        return GateVerdict(
            ready=False,
            reason=Reason.PROBE_ERROR,
            message=f"probe failed: {error}",
            unanswered=True,
            load_failed=load_failed,
        )
    if ps_entry is None:
        return GateVerdict(
            ready=False,
            reason=Reason.PROBE_ERROR,
            message="the model is not loaded (absent from /api/ps); the next warmup loads it",
        )
    precision = ps_entry.details.quantization_level
    want_digest = expected_digest.strip().lower().removeprefix("sha256:")
    wrong = _what_is_wrong(want_digest, expected_device, ps_entry)
    if wrong is not None:
        reason, message = wrong
        return GateVerdict(ready=False, reason=reason, message=message, precision=precision)
    return GateVerdict(
        ready=True,
        reason=Reason.MODEL_READY,
        message=f"digest {want_digest[:12]} loaded on {ps_entry.device}, pinned",
        precision=precision,
    )


def _what_is_wrong(
    want_digest: str, expected_device: str, ps_entry: PsModel
) -> tuple[Reason, str] | None:
    """The first of digest, device class, pin that fails for a loaded model, and the fix."""
    if ps_entry.digest != want_digest:
        return Reason.DIGEST_MISMATCH, (
            f"loaded digest {ps_entry.digest[:12] or '(empty)'} but the revision pins "
            f"{want_digest[:12]}; the tag moved upstream mid-rollout: re-resolve (change "
            "the spec) or pin spec.digest"
        )
    want_class = _expected_class(expected_device)
    if want_class is None or device_class(ps_entry.device) != want_class:
        return Reason.DEVICE_MISMATCH, (
            f"loaded on device {ps_entry.device!r} but spec.device is '{expected_device}'; "
            "fix spec.device or the node's GPU (a runtime that fell back to CPU reports cpu)"
        )
    if not ps_entry.pinned:
        expires = ps_entry.expires_at.isoformat() if ps_entry.expires_at else ""
        return Reason.NOT_PINNED, (
            f"loaded but not pinned (expires_at {expires}), the runtime may evict it; the "
            "warmup pins it with keep_alive -1, persisting means the runtime drops the pin"
        )
    return None


def runtime_base_url(pod_ip: str, port: int = RUNTIME_PORT) -> str:
    """``http://<podIP>:11435``; an IPv6 Pod IP is bracketed."""
    address = ip_address(pod_ip)
    host = f"[{address}]" if isinstance(address, IPv6Address) else str(address)
    return f"http://{host}:{port}"


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: httpx.Headers
    body: bytes

    def json_object(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.body)
        except (ValueError, RecursionError):
            # Not JSON, not UTF-8 (both ValueErrors), an integer past Python's digit limit
            # (a plain ValueError), or nested past the recursion limit: no usable answer.
            return None
        return data if isinstance(data, dict) else None

    def error_code(self) -> str | None:
        data = self.json_object()
        code = data.get("code") if data else None
        return code if isinstance(code, str) else None

    def error_text(self) -> str:
        data = self.json_object()
        text = data.get("error") if data else None
        return text[:_QUOTED_TEXT_LIMIT] if isinstance(text, str) else ""


class RuntimeClient:
    """The runtime API of one serving Pod. Use ``async with`` or call ``aclose()``."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeouts: RuntimeTimeouts | None = None,
        default_registry: str = DEFAULT_REGISTRY,
        queue_full_attempts: int = 5,
        max_retry_after: float = 10.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._timeouts = timeouts or RuntimeTimeouts()
        self._default_registry = default_registry
        self._queue_full_attempts = queue_full_attempts
        self._max_retry_after = max_retry_after
        self._max_body_bytes = max_body_bytes
        self._sleep = sleep
        # Back-pressure shared by every request to this Pod (the evaluation keeps several in
        # flight): while a request waits out a QUEUE_FULL's Retry-After, no other is sent.
        self._open = asyncio.Event()
        self._open.set()
        self._backing_off = 0
        headers = {"User-Agent": "dmrollout-prober"}
        if api_key:
            if not header_safe(api_key):
                # httpx would raise UnicodeEncodeError (quoting the character and its
                # position) or h11 an error quoting the header: refuse before either.
                raise APIKeyInvalid(
                    "the API key of spec.auth.apiKeySecretRef cannot be sent in an HTTP "
                    f"header: it must be {KEY_RULE}; write the key again in the Secret",
                    permanent=True,
                )
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            base_url=self._base_url,
            transport=transport,
            trust_env=False,
            follow_redirects=False,
            headers=headers,
            verify=shared_tls_context(),
        )

    @classmethod
    def for_pod(cls, pod_ip: str, **options: Any) -> RuntimeClient:
        return cls(runtime_base_url(pod_ip), **options)

    def __repr__(self) -> str:
        return f"RuntimeClient({self._base_url!r})"

    async def __aenter__(self) -> RuntimeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def version(self) -> str:
        answer = await self._call("GET", "/api/version", None, self._timeouts.version, "version")
        self._raise_for_probe(answer, "version")
        data = answer.json_object()
        version = data.get("version") if data else None
        if not isinstance(version, str):
            raise ProbeError(f"{self._base_url}/api/version did not answer {{'version': str}}")
        return version

    async def warmup(self, model: str, timeout: float | None = None) -> WarmupResult:
        """Load and pin ``model`` (keep_alive -1). Raises ProbeError (with ``status``/``code``
        when the runtime answered) unless the answer is ``done_reason: "load"``."""
        seconds = self._timeouts.warmup if timeout is None else timeout
        payload = {"model": model, "keep_alive": -1}
        answer = await self._call("POST", "/api/decide", payload, seconds, f"warmup of {model}")
        if answer.status == 404:
            raise ProbeError(
                f"warmup of {model}: the runtime at {self._base_url} has no such model in its "
                f"store (404 {answer.error_code() or ''}); check the prefetch wrote the store "
                "and OLLAYA_REGISTRY matches the registry the model was pulled from",
                status=404,
                code=answer.error_code(),
            )
        if answer.status == 500 and answer.error_code() == LOAD_FAILED_CODE:
            raise ProbeError(
                f"warmup of {model}: the runtime failed to load it (500 MODEL_LOAD_FAILED: "
                f"{answer.error_text()!r}); check spec.device against the node and the "
                "Pod's memory limit",
                status=500,
                code=LOAD_FAILED_CODE,
            )
        if 400 <= answer.status < 500 and answer.status not in _RETRYABLE_4XX:
            raise RuntimeRequestRejected(
                f"warmup of {model}: the runtime at {self._base_url} refused it "
                f"({answer.status} {answer.error_code() or 'no code'}: {answer.error_text()!r}); "
                "spec.model must be [http(s)://][host/][namespace/]model:tag (RUNTIME_API.md): "
                "fix spec.model, or run a runtime version that accepts it (spec.runtimeVersion)",
                status=answer.status,
                code=answer.error_code(),
            )
        self._raise_for_probe(answer, f"warmup of {model}")
        data = answer.json_object()
        done_reason = data.get("done_reason") if data else None
        if done_reason != "load":
            raise ProbeError(
                f"warmup of {model}: expected done_reason 'load', got {done_reason!r}",
                status=answer.status,
            )
        duration = data.get("load_duration") if data else None
        return WarmupResult(
            model=model,
            done_reason=done_reason,
            load_duration_ns=duration if isinstance(duration, int) else None,
        )

    async def ps(self) -> list[PsModel]:
        """``GET /api/ps``. Raises ProbeError on any failure (401 included, with ``status``)."""
        return [self._ps_entry(entry) for entry in await self._ps_raw()]

    async def inspect(self, model: str) -> PsModel | None:
        """The ``/api/ps`` entry of ``model``, or None when it is not loaded. An entry matches
        when its ``name``/``model`` equals ``model`` or names the same model once both are
        qualified with the default registry (``laya:en`` is ``ollaya.dev/library/laya:en``).
        Only the matching entry is validated: a malformed entry of another model must not fail
        this model's gate."""
        entries = await self._ps_raw()
        names = [(entry.get("name"), entry.get("model")) for entry in entries]
        for entry, pair in zip(entries, names, strict=True):
            if model in pair:
                return self._ps_entry(entry)
        wanted = self._qualified(model)
        if wanted is None:
            return None
        for entry, pair in zip(entries, names, strict=True):
            if wanted in (self._qualified(name) for name in pair):
                return self._ps_entry(entry)
        return None

    async def _ps_raw(self) -> list[dict[str, Any]]:
        answer = await self._call("GET", "/api/ps", None, self._timeouts.inspect, "inspect")
        self._raise_for_probe(answer, "inspect")
        data = answer.json_object()
        entries = data.get("models") if data else None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ProbeError(f"{self._base_url}/api/ps did not answer {{'models': [{{...}}]}}")
        return entries

    def _ps_entry(self, entry: dict[str, Any]) -> PsModel:
        try:
            return PsModel.model_validate(entry)
        except ValidationError as err:
            fields = ", ".join(".".join(map(str, e["loc"])) for e in err.errors())
            raise ProbeError(
                f"{self._base_url}/api/ps: the entry of {entry.get('name')!r} lacks or mistypes "
                f"{fields}"
            ) from None

    async def decide(
        self, model: str, state: object, questions: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``POST /v1/systemone``. ``503 QUEUE_FULL`` (and 429) are retried after
        ``Retry-After`` up to ``queue_full_attempts`` requests in all, then QueueFull. 401 and
        5xx → ProbeError (transient); other 4xx → RuntimeRequestRejected (permanent); a 2xx
        without a readable ``answers`` object → RuntimeAnswerInvalid (permanent). Messages
        carry status and code only: the runtime's text may echo the request (dataset content).

        Concurrent calls share the back-off: a QUEUE_FULL holds every request to this Pod until
        its ``Retry-After`` (capped at ``max_retry_after``) has passed, so a full Pod is given
        time to drain instead of being hit by the other requests in flight.
        """
        payload = {"model": model, "state": state, "questions": dict(questions)}
        for attempt in range(1, self._queue_full_attempts + 1):
            await self._open.wait()
            answer = await self._call(
                "POST", "/v1/systemone", payload, self._timeouts.decide, "decide"
            )
            code = answer.error_code()
            if answer.status == 429 or (answer.status == 503 and code == "QUEUE_FULL"):
                if attempt == self._queue_full_attempts:
                    raise QueueFull(
                        f"decide on {self._base_url}: the runtime queue stayed full "
                        f"({answer.status} {code or ''}) for {attempt} attempts; lower the "
                        "evaluation concurrency or add replicas",
                        status=answer.status,
                        code=code,
                    )
                await self._back_off(self._queue_full_wait(answer))
                continue
            return self._decision(answer)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def _back_off(self, seconds: float) -> None:
        """Sleep ``seconds`` (bounded by max_retry_after) with this Pod closed to new sends."""
        self._backing_off += 1
        self._open.clear()
        try:
            await self._sleep(seconds)
        finally:
            self._backing_off -= 1
            if not self._backing_off:
                self._open.set()

    def _decision(self, answer: _Answer) -> dict[str, Any]:
        code = answer.error_code()
        if answer.status == 401 or answer.status >= 500:
            self._raise_for_probe(answer, "decide")
        if not 200 <= answer.status < 300:
            raise RuntimeRequestRejected(
                f"decide on {self._base_url}: the runtime rejected the request "
                f"({answer.status} {code or 'no code'}); check the model name and the "
                "dataset case's state and questions",
                status=answer.status,
                code=code,
            )
        data = answer.json_object()
        if data is None or not isinstance(data.get("answers"), dict):
            raise RuntimeAnswerInvalid(
                f"decide on {self._base_url}: the runtime answered {answer.status} without "
                "a readable 'answers' object (not JSON, a number out of range, nested too "
                "deeply, or another shape); the case counts as wrong",
                status=answer.status,
            )
        return data

    def _qualified(self, name: object) -> str | None:
        if not isinstance(name, str):
            return None
        try:
            ref = parse_model_name(name, default_registry=self._default_registry, require_tag=False)
        except (InvalidModelName, ValueError):
            return None
        return ref.canonical

    def _queue_full_wait(self, answer: _Answer) -> float:
        header = answer.headers.get("Retry-After", "").strip()
        try:
            wait = float(header) if header else DEFAULT_QUEUE_FULL_WAIT
        except ValueError:
            wait = DEFAULT_QUEUE_FULL_WAIT
        if math.isnan(wait):
            # `Retry-After: nan` parses, and min/max pass NaN through: asyncio.sleep(nan).
            wait = DEFAULT_QUEUE_FULL_WAIT
        return min(max(wait, 0.0), self._max_retry_after)

    def _raise_for_probe(self, answer: _Answer, what: str) -> None:
        if 200 <= answer.status < 300:
            return
        code = answer.error_code()
        if answer.status == 401:
            raise ProbeError(
                f"{what}: {self._base_url} refused the API key (401 {code or 'UNAUTHORIZED'}); "
                "check spec.auth.apiKeySecretRef (a rotation leaves old Pods on the old key "
                "until they roll)",
                status=401,
                code=code,
            )
        raise ProbeError(
            f"{what}: {self._base_url} answered {answer.status} {code or ''}".rstrip(),
            status=answer.status,
            code=code,
        )

    async def _call(
        self, method: str, path: str, payload: object, seconds: float, what: str
    ) -> _Answer:
        """One request with a total deadline and a capped body; transport failures and
        timeouts become ProbeError."""
        timeout = httpx.Timeout(seconds, connect=min(self._timeouts.connect, seconds))
        try:
            request = self._client.build_request(method, path, json=payload, timeout=timeout)
        except (UnicodeEncodeError, ValueError):
            # A payload that is not encodable (a lone surrogate in a dataset's state): the
            # error's text quotes the character and its position, so it is not repeated.
            raise RuntimeRequestRejected(
                f"{what}: the request body cannot be encoded as UTF-8 JSON; check the dataset "
                "case's state and questions"
            ) from None
        try:
            async with asyncio.timeout(seconds):
                response = await self._client.send(request, stream=True)
                try:
                    body = await self._read_capped(response, what)
                finally:
                    await response.aclose()
        except (TimeoutError, httpx.TimeoutException):
            raise ProbeError(
                f"{what}: {self._base_url} did not answer within {seconds:g} s; check the "
                "runtime's logs (a load slower than the warm-up timeout, an overloaded Pod)"
            ) from None
        except httpx.LocalProtocolError as err:
            # h11 quotes the offending header or body value: never repeat its text.
            raise ProbeError(
                f"{what}: the request to {self._base_url} was refused by the HTTP library "
                f"({type(err).__name__}) before it was sent"
            ) from None
        except httpx.TransportError as err:
            raise ProbeError(
                f"{what}: {self._base_url} cannot be reached ({type(err).__name__}: {err}); "
                "check the Pod's runtime is up and its port is reachable from the worker "
                "(NetworkPolicy)"
            ) from None
        except httpx.HTTPError as err:
            raise ProbeError(f"{what}: {self._base_url}: {type(err).__name__}: {err}") from None
        except UnicodeError as err:
            # Anything else that fails to encode a header or body: its text may quote it.
            raise ProbeError(
                f"{what}: a value of the request to {self._base_url} could not be encoded "
                f"({type(err).__name__}; details withheld, they may quote a secret)"
            ) from None
        return _Answer(status=response.status_code, headers=response.headers, body=body)

    async def _read_capped(self, response: httpx.Response, what: str) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self._max_body_bytes:
                raise ProbeError(
                    f"{what}: {self._base_url} answered more than {self._max_body_bytes} bytes"
                )
            chunks.append(chunk)
        return b"".join(chunks)
