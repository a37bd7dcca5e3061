"""Wire conventions of the Ollaya API (RUNTIME_API.md, "Conventions"), shared by both simulators.

JSON bodies capped at 8 MiB (413 `REQUEST_TOO_LARGE`), errors `{"error", "code"}` (+ `detail` for
422), probabilities rounded to 4 decimals, durations in integer nanoseconds, RFC 3339 UTC `Z`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

MAX_BODY_BYTES = 8 * 1024 * 1024


class ApiError(Exception):
    """An error answer; the error middleware renders it as `{"error", "code"[, "detail"]}`."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str,
        *,
        detail: list[dict[str, Any]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.detail = detail
        self.headers = dict(headers or {})

    def response(self) -> web.Response:
        return json_error(
            self.status, self.message, self.code, detail=self.detail, headers=self.headers
        )


def json_error(
    status: int,
    message: str,
    code: str,
    *,
    detail: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    body: dict[str, Any] = {"error": message, "code": code}
    if detail is not None:
        body["detail"] = detail
    return web.json_response(body, status=status, headers=headers)


def validation_error(detail: list[dict[str, Any]]) -> ApiError:
    first = detail[0]["msg"] if detail else "invalid request"
    return ApiError(422, first, "VALIDATION_ERROR", detail=detail)


def detail_item(loc: list[str | int], msg: str, kind: str) -> dict[str, Any]:
    """One `detail` entry, shaped like FastAPI's (`loc`, `msg`, `type`)."""
    return {"loc": loc, "msg": msg, "type": kind}


def round4(value: float) -> float:
    return round(value, 4)


def rfc3339(moment: datetime) -> str:
    """UTC with a `Z` suffix and microseconds, e.g. `2025-01-02T03:04:05.000000Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_HTTP_CODES = {
    400: "BAD_REQUEST",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "REQUEST_TOO_LARGE",
}


@web.middleware
async def error_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Render ApiError and aiohttp's own HTTP errors (404 route, 405) as contract error bodies."""
    try:
        return await handler(request)
    except ApiError as err:
        return err.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "HTTP_ERROR")
        headers = {k: v for k, v in exc.headers.items() if k.lower() in {"allow", "retry-after"}}
        return json_error(exc.status, exc.reason, code, headers=headers)


async def read_body(request: web.Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, or 413 `REQUEST_TOO_LARGE` as soon as it exceeds `limit` bytes."""
    too_large = ApiError(413, f"request body exceeds {limit} bytes", "REQUEST_TOO_LARGE")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    chunks: list[bytes] = []
    total = 0
    # Reading in chunks stops a chunked upload without Content-Length at the cap instead of
    # buffering all of it.
    while True:
        chunk = await request.content.readany()
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: web.Request, limit: int = MAX_BODY_BYTES) -> Any:
    """Parsed JSON body (an empty body reads as `{}`); 400 `BAD_REQUEST` when it is not JSON."""
    raw = await read_body(request, limit)
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"invalid JSON body: {exc}", "BAD_REQUEST") from exc
