"""Ollaya model names as the runtime simulator parses them (RUNTIME_API.md, "Registry").

`[host/][namespace/]model:tag`, lower-cased. The first segment is a host when it contains `.` or
`:` or is `localhost`; otherwise the host comes from `OLLAYA_REGISTRY` (which may carry
`http://` or `https://`), else `https://ollaya.dev`. The default namespace is `library`; a bare
name means `:latest`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_REGISTRY = "https://ollaya.dev"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"

_PART = re.compile(r"^[a-z0-9_][a-z0-9_.-]{0,79}$")
_HOST = re.compile(r"^[a-z0-9_][a-z0-9_.-]{0,79}(:[0-9]{1,5})?$")


class InvalidModelName(ValueError):
    """The name does not follow `[host/][namespace/]model:tag`."""


@dataclass(frozen=True)
class ModelRef:
    scheme: str  # "http" or "https"
    host: str  # authority, e.g. "ollaya.dev" or "127.0.0.1:5000"
    namespace: str
    model: str
    tag: str

    @property
    def key(self) -> str:
        """One identity for a model however it was spelled (`laya:en` vs the full form)."""
        return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}"

    @property
    def manifest_url(self) -> str:
        return f"{self.base_url}/v2/{self.namespace}/{self.model}/manifests/{self.tag}"

    def blob_url(self, digest: str) -> str:
        return f"{self.base_url}/v2/{self.namespace}/{self.model}/blobs/{digest}"


def split_registry(registry: str | None) -> tuple[str, str]:
    """`(scheme, host)` of a registry base such as `http://127.0.0.1:5000` or `ollaya.dev`."""
    value = (registry or DEFAULT_REGISTRY).strip().lower().rstrip("/")
    scheme = "https"
    for candidate in ("http", "https"):
        prefix = f"{candidate}://"
        if value.startswith(prefix):
            scheme, value = candidate, value[len(prefix) :]
    if not _HOST.match(value):
        raise InvalidModelName(f"invalid registry host {registry!r}")
    return scheme, value


def _is_host(segment: str) -> bool:
    return "." in segment or ":" in segment or segment == "localhost"


def parse_model_name(name: str, registry: str | None = None) -> ModelRef:
    """Parse `name`; `registry` is the `OLLAYA_REGISTRY` value (None: ollaya.dev)."""
    value = name.strip().lower()
    if not value:
        raise InvalidModelName("model name is empty")
    path, tag = value, DEFAULT_TAG
    slash = value.rfind("/")
    colon = value.rfind(":")
    if colon > slash:
        path, tag = value[:colon], value[colon + 1 :]
    segments = path.split("/")
    if len(segments) > 3:
        raise InvalidModelName(f"invalid model name {name!r}: more than three segments")
    default_scheme, default_host = split_registry(registry)
    scheme, host, namespace = default_scheme, default_host, DEFAULT_NAMESPACE
    if len(segments) == 3 or (len(segments) == 2 and _is_host(segments[0])):
        explicit = segments.pop(0)
        if not _is_host(explicit) or not _HOST.match(explicit):
            raise InvalidModelName(f"invalid registry host in model name {name!r}")
        # An explicit host uses TLS unless it is the configured registry, whose scheme we know
        # (an http:// mirror "makes the pull non-TLS automatically", seed 001).
        scheme = default_scheme if explicit == default_host else "https"
        host = explicit
    if len(segments) == 2:
        namespace = segments.pop(0)
    model = segments[0]
    for part, what in ((namespace, "namespace"), (model, "model"), (tag, "tag")):
        if not _PART.match(part):
            raise InvalidModelName(f"invalid {what} {part!r} in model name {name!r}")
    return ModelRef(scheme=scheme, host=host, namespace=namespace, model=model, tag=tag)


def display_name(name: str) -> str:
    """The name `/api/ps` reports: as requested, lower-cased, with `:latest` made explicit."""
    value = name.strip().lower()
    return value if value.rfind(":") > value.rfind("/") else f"{value}:{DEFAULT_TAG}"
