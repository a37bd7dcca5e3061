"""The API server's verdict on a DecisionModel: a server-side dry-run create (`?dryRun=All`).

One keep-alive HTTPS connection with the admin client certificate of the local cluster's
kubeconfig: a dry-run create is a few milliseconds, so ten thousand of them fit in a couple of
minutes, where `kubectl create --dry-run=server` per object would take tens of minutes.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from decisionmodel.api import GROUP, PLURAL, VERSION


@dataclass(frozen=True)
class Verdict:
    """Accepted (with the object as the server would store it) or refused, with the field paths
    and messages the refusal names."""

    accepted: bool
    stored: dict[str, Any] | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)

    def text(self) -> str:
        return "; ".join(f"{path}: {message}" for path, message in self.errors)


class DryRunClient:
    """POSTs DecisionModels to the API server with `dryRun=All`; nothing is ever stored."""

    def __init__(self, kubeconfig: Path, namespace: str = "default") -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        context.load_cert_chain(user["client-certificate"], user["client-key"])
        self._client = httpx.Client(
            base_url=cluster["server"],
            verify=context,
            trust_env=False,
            timeout=30.0,
        )
        self._path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"

    def close(self) -> None:
        self._client.close()

    def create(self, body: bytes) -> Verdict:
        answer = self._client.post(
            self._path,
            params={"dryRun": "All", "fieldValidation": "Ignore"},
            content=body,
            headers={"Content-Type": "application/json"},
        )
        data = answer.json()
        if answer.status_code in (200, 201):
            return Verdict(accepted=True, stored=data)
        if answer.status_code not in (400, 422):
            raise RuntimeError(f"unexpected answer {answer.status_code}: {answer.text[:500]}")
        return Verdict(accepted=False, errors=_causes(data))


def _causes(status: dict[str, Any]) -> list[tuple[str, str]]:
    causes = (status.get("details") or {}).get("causes") or []
    errors = [(str(c.get("field", "")), str(c.get("message", ""))) for c in causes]
    return errors or [("", str(status.get("message", "")))]


def dumps(obj: Any) -> bytes:
    """JSON as a client sends it; NaN/inf cannot be written and lone surrogates are escaped."""
    return json.dumps(obj, allow_nan=False).encode()
