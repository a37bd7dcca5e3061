"""Ollaya model names as the runtime simulator parses them (RUNTIME_API.md, "Registry").

`[host/][namespace/]model:tag`, lower-cased. The first segment is a host when it contains `.` or
`:` or is `localhost`, or when it carries `http://` or `https://` (a scheme can only prefix a
host). A host written without a scheme is https, whatever `OLLAYA_REGISTRY` says: that variable
is the registry of host-less names only (seed 001: "an explicit host in the name overrides
--ollaya-registry for that model"). A host-less name takes the host and scheme of
`OLLAYA_REGISTRY` (a base such as `http://127.0.0.1:5000`; https when it has no scheme), else
`https://ollaya.dev`. The default namespace is `library`; a bare name means `:latest`; more than
three segments is invalid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_REGISTRY = "https://ollaya.dev"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
SCHEMES = ("http", "https")

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
        """One identity for a model however it was spelled (`laya:en` vs the full form, with or
        without a scheme): the store is keyed by host, not by scheme."""
        return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}"

    @property
    def manifest_url(self) -> str:
        return f"{self.base_url}/v2/{self.namespace}/{self.model}/manifests/{self.tag}"

    def blob_url(self, digest: str) -> str:
        return f"{self.base_url}/v2/{self.namespace}/{self.model}/blobs/{digest}"


def _split_scheme(value: str) -> tuple[str | None, str]:
    """`(scheme, rest)` of `http://…` or `https://…`; `(None, value)` without a scheme."""
    for candidate in SCHEMES:
        prefix = f"{candidate}://"
        if value.startswith(prefix):
            return candidate, value[len(prefix) :]
    return None, value


def split_registry(registry: str | None) -> tuple[str, str]:
    """`(scheme, host)` of a registry base such as `http://127.0.0.1:5000` or `ollaya.dev`."""
    value = (registry or DEFAULT_REGISTRY).strip().lower().rstrip("/")
    scheme, host = _split_scheme(value)
    if not _HOST.match(host):
        raise InvalidModelName(f"invalid registry host {registry!r}")
    return scheme or "https", host


def _is_host(segment: str) -> bool:
    return "." in segment or ":" in segment or segment == "localhost"


def _split_tag(path: str) -> tuple[str, str]:
    """`(path, tag)`: the tag follows the last `:` after the last `/` (a port's `:` is not)."""
    slash, colon = path.rfind("/"), path.rfind(":")
    if colon > slash:
        return path[:colon], path[colon + 1 :]
    return path, DEFAULT_TAG


def _explicit_host(name: str, scheme: str | None, segments: list[str]) -> str | None:
    """Pops and returns the name's own host, or None when the registry is the default one."""
    reads_as_host = len(segments) == 3 or (len(segments) == 2 and _is_host(segments[0]))
    if scheme is None and not reads_as_host:
        return None
    if len(segments) < 2:
        raise InvalidModelName(f"invalid model name {name!r}: a scheme needs a host and a model")
    host = segments.pop(0)
    # Without a scheme only a host-looking segment is a host: `acme/team/laya` is no name.
    if (scheme is None and not _is_host(host)) or not _HOST.match(host):
        raise InvalidModelName(f"invalid registry host in model name {name!r}")
    return host


def parse_model_name(name: str, registry: str | None = None) -> ModelRef:
    """Parse `name`; `registry` is the `OLLAYA_REGISTRY` value (None: ollaya.dev)."""
    value = name.strip().lower()
    if not value:
        raise InvalidModelName("model name is empty")
    scheme, rest = _split_scheme(value)
    path, tag = _split_tag(rest)
    segments = path.split("/")
    if len(segments) > 3:
        raise InvalidModelName(f"invalid model name {name!r}: more than three segments")
    host = _explicit_host(name, scheme, segments)
    if host is None:
        scheme, host = split_registry(registry)
    namespace = segments.pop(0) if len(segments) == 2 else DEFAULT_NAMESPACE
    model = segments[0]
    for part, what in ((namespace, "namespace"), (model, "model"), (tag, "tag")):
        if not _PART.match(part):
            raise InvalidModelName(f"invalid {what} {part!r} in model name {name!r}")
    # An explicit host without a scheme is https (RUNTIME_API.md: "default https").
    return ModelRef(scheme=scheme or "https", host=host, namespace=namespace, model=model, tag=tag)


def display_name(name: str) -> str:
    """The name `/api/ps` reports: as requested, lower-cased, with `:latest` made explicit."""
    value = name.strip().lower()
    return value if value.rfind(":") > value.rfind("/") else f"{value}:{DEFAULT_TAG}"
