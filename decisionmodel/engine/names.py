"""Ollaya model names: ``[host/][namespace/]model:tag``, and the allowed-registries guard.

Grammar (RUNTIME_API.md "Registry"): lower-cased; the host is the first segment when it contains
``.`` or ``:`` or is ``localhost``; default host ``ollaya.dev`` (or the operator's configured
default registry base URL, ``--ollaya-registry`` / ``OLLAYA_REGISTRY``); default namespace
``library``; a host may carry ``http://`` or ``https://`` (default https); each of namespace,
model and tag matches ``[a-z0-9_][a-z0-9_.-]{0,79}``; more than three segments is invalid. A bare
name means ``:latest``, a different and heavier artifact, so rollouts require an explicit tag
(seed 001: "model must include an explicit tag, e.g. laya:en").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from decisionmodel.errors import InvalidModelName, RegistryNotAllowed

Scheme = Literal["http", "https"]

DEFAULT_REGISTRY = "https://ollaya.dev"
DEFAULT_NAMESPACE = "library"
LATEST_TAG = "latest"
EXPLICIT_TAG_MESSAGE = "model must include an explicit tag, e.g. laya:en"

# fullmatch, not `^…$`: `$` also matches before a trailing newline.
PART_PATTERN = r"[a-z0-9_][a-z0-9_.-]{0,79}"
_PART_RE = re.compile(PART_PATTERN)
# One DNS label or IPv4 octet of a registry host; registries are lenient about hyphen placement.
_HOST_LABEL_RE = re.compile(r"[a-z0-9-]+")
_DIGEST_RE = re.compile(r"(?:sha256:)?([a-f0-9]{64})")
_DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443}


class ModelRef(BaseModel):
    """A parsed, fully qualified model name. ``host`` is the registry authority (``host[:port]``,
    lower-cased, no scheme)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scheme: Scheme
    host: str
    namespace: str
    model: str
    tag: str

    @model_validator(mode="after")
    def _check_parts(self) -> ModelRef:
        # A ref also arrives deserialised (workflow input), not only from parse_model_name.
        problem = _host_problem(self.host)
        if problem is not None:
            raise ValueError(problem)
        for label, part in (
            ("namespace", self.namespace),
            ("model", self.model),
            ("tag", self.tag),
        ):
            if not _PART_RE.fullmatch(part):
                raise ValueError(f"{label} {part!r} must match {PART_PATTERN}")
        return self

    @property
    def registry_base(self) -> str:
        """``<scheme>://<host>``, the base every registry URL of this model hangs off."""
        return f"{self.scheme}://{self.host}"

    @property
    def manifest_url(self) -> str:
        return f"{self.registry_base}/v2/{self.namespace}/{self.model}/manifests/{self.tag}"

    def blob_url(self, digest: str) -> str:
        """URL of a blob, given ``sha256:<hex>`` or bare hex."""
        match = _DIGEST_RE.fullmatch(digest)
        if match is None:
            raise ValueError(f"blob digest must be sha256:<64 hex> or 64 hex, got {digest!r}")
        return f"{self.registry_base}/v2/{self.namespace}/{self.model}/blobs/sha256:{match[1]}"

    @property
    def store_manifest_path(self) -> str:
        """Where ``ollaya pull`` writes the manifest inside ``OLLAYA_MODELS``; the port's ``:``
        is written ``_`` (seed 001: ``mirror.corp:8080`` → ``manifests/mirror.corp_8080/…``)."""
        host_dir = self.host.replace(":", "_")
        return f"manifests/{host_dir}/{self.namespace}/{self.model}/{self.tag}"

    @property
    def canonical(self) -> str:
        """The fully qualified name, e.g. ``ollaya.dev/library/laya:en``. The scheme is written
        when it is http, or when the host would not read as one (``https://registry/…``), so
        parsing the canonical form gives this ref back whatever the default registry is."""
        prefix = ""
        if self.scheme == "http" or not _looks_like_host(self.host):
            prefix = f"{self.scheme}://"
        return f"{prefix}{self.host}/{self.namespace}/{self.model}:{self.tag}"

    def __str__(self) -> str:
        return self.canonical


def parse_registry_base(url: str) -> tuple[Scheme, str]:
    """Split a registry base URL (``https://mirror.corp``, ``http://127.0.0.1:5000``, or a bare
    ``mirror.corp`` meaning https) into scheme and validated, lower-cased authority. A path, query
    or user info is refused: the operator configures a registry, not an endpoint."""
    text = url.strip().lower().rstrip("/")
    scheme: Scheme = "https"
    if text.startswith("http://"):
        scheme, text = "http", text[len("http://") :]
    elif text.startswith("https://"):
        text = text[len("https://") :]
    elif "://" in text:
        raise ValueError(f"registry URL {url!r} must use http:// or https://")
    problem = _host_problem(text)
    if problem is not None:
        raise ValueError(f"registry URL {url!r}: {problem}")
    return scheme, text


def parse_model_name(
    name: str,
    *,
    default_registry: str = DEFAULT_REGISTRY,
    require_tag: bool = True,
) -> ModelRef:
    """Parse ``spec.model``. Raises InvalidModelName with the reason; with ``require_tag=False`` a
    bare name means ``:latest`` (what the runtime itself does; rollouts keep the default)."""
    lowered = name.strip().lower()
    if not lowered:
        raise _invalid(name, "the name is empty")

    scheme: Scheme | None = None
    rest = lowered
    if rest.startswith("http://"):
        scheme, rest = "http", rest[len("http://") :]
    elif rest.startswith("https://"):
        scheme, rest = "https", rest[len("https://") :]

    segments = rest.split("/")
    if len(segments) > 3:
        raise _invalid(name, "more than three '/'-separated segments")
    if any(segment == "" for segment in segments):
        raise _invalid(name, "an empty segment (leading, trailing or doubled '/')")

    host: str | None = None
    if scheme is not None or (len(segments) >= 2 and _looks_like_host(segments[0])):
        if len(segments) < 2:
            raise _invalid(name, "a scheme needs a registry host followed by the model")
        host = segments.pop(0)
        problem = _host_problem(host)
        if problem is not None:
            raise _invalid(name, problem)
    elif len(segments) == 3:
        raise _invalid(
            name, f"with three segments the first ({segments[0]!r}) must be a registry host"
        )

    if host is None:
        scheme, host = parse_registry_base(default_registry)
    elif scheme is None:
        scheme = "https"

    namespace = segments[0] if len(segments) == 2 else DEFAULT_NAMESPACE
    model, colon, tag = segments[-1].partition(":")
    if not colon:
        if require_tag:
            raise InvalidModelName(f"spec.model {name!r}: {EXPLICIT_TAG_MESSAGE}")
        tag = LATEST_TAG

    for label, part in (("namespace", namespace), ("model", model), ("tag", tag)):
        if not _PART_RE.fullmatch(part):
            raise _invalid(name, f"{label} {part!r} must match {PART_PATTERN} (after lower-casing)")
    return ModelRef(scheme=scheme, host=host, namespace=namespace, model=model, tag=tag)


def check_registry_allowed(ref: ModelRef, allowed: Sequence[str], allow_insecure: bool) -> None:
    """The SSRF guard, run before any registry request. ``allowed`` holds hosts with an optional
    port (``ollaya.dev``, ``127.0.0.1:5000``; a scheme prefix is tolerated and ignored). An entry
    without a port admits only the scheme's default port: another port is another server."""
    wanted = _authority(ref.scheme, ref.host)
    entries = [entry.strip().lower() for entry in allowed if entry.strip()]
    admitted = False
    for entry in entries:
        entry_host = entry.split("://", 1)[-1].rstrip("/")
        if _authority(ref.scheme, entry_host) == wanted:
            admitted = True
            break
    if not admitted:
        raise RegistryNotAllowed(
            f"spec.model {ref.canonical!r}: registry {ref.host!r} is not in --allowed-registries "
            f"({', '.join(entries) or 'empty'}); use an allowed registry or add it to "
            "--allowed-registries (Helm manager.allowedRegistries)"
        )
    if ref.scheme == "http" and not allow_insecure:
        raise RegistryNotAllowed(
            f"spec.model {ref.canonical!r}: registry {ref.registry_base} is plain http://; "
            "use https or run the operator with --allow-insecure-registries (dev only)"
        )


def _invalid(name: str, problem: str) -> InvalidModelName:
    return InvalidModelName(
        f"spec.model {name!r} is not a valid model name: {problem}; "
        "use [host/][namespace/]model:tag, e.g. laya:en or registry.example.com/acme/triage:v3"
    )


def _looks_like_host(segment: str) -> bool:
    return "." in segment or ":" in segment or segment == "localhost"


def _host_problem(host: str) -> str | None:
    """Why ``host`` (``hostname[:port]``, no scheme) is not a registry authority, or None."""
    hostname, colon, port = host.partition(":")
    if colon and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return f"registry host {host!r} has an invalid port (1-65535)"
    labels = hostname.split(".")
    if not hostname or not all(_HOST_LABEL_RE.fullmatch(label) for label in labels):
        return (
            f"registry host {host!r} must be dot-separated [a-z0-9-] labels with an optional :port"
        )
    return None


def _authority(scheme: str, host: str) -> tuple[str, int]:
    """(hostname, effective port): ``ollaya.dev`` and ``ollaya.dev:443`` are the same https
    server. An unparsable port yields -1, which matches nothing a ModelRef can hold."""
    hostname, colon, port = host.partition(":")
    if not colon:
        return hostname, _DEFAULT_PORTS[scheme]
    return hostname, int(port) if port.isascii() and port.isdigit() else -1
