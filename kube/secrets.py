"""Reads of referenced Secrets and dataset ConfigMaps, with the capability-label guard.

A DecisionModel editor must not be able to point dmrollout at an arbitrary Secret of the
namespace (seed 001, "Secrets"): a Secret is read only when it carries the label of the
capability it is used for, else SecretNotAllowed (transient: labelling it is the fix, picked up
by the next attempt without a spec change).

| capability | label | missing Secret or key |
| --- | --- | --- |
| engine API key | ``decisionmodel.io/api-key: "true"`` | APIKeyInvalid |
| evaluation dataset | ``decisionmodel.io/eval-dataset: "true"`` | DatasetNotFound |
| weight download token | ``decisionmodel.io/download-token: "true"`` | SecretNotFound |

All of them are transient: REFERENCE.md holds a rollout in its phase until the user fixes the
object or the phase times out. One exception: an API key no HTTP header can carry (non-ASCII or
control characters, ``parse_api_key``) is APIKeyInvalid raised permanent, since every attempt
would fail the same way. A dataset Secret labelled only with the older api-key label is
still accepted, with a ``DeprecatedSecretLabel`` Warning Event (seed 001 "Transition").

Values never leave this module's callers: errors name the object, the key and the label only,
never a value (they end up in workflow history, status and Events).
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from decisionmodel.engine.api_key import KEY_RULE, header_safe
from decisionmodel.errors import (
    APIKeyInvalid,
    DatasetNotFound,
    DmrolloutError,
    SecretNotAllowed,
    SecretNotFound,
    SecretReadFailed,
)
from decisionmodel.rollout.contracts import DMRef, KeyRef
from decisionmodel.vocabulary import EventReason
from kube.client import Kube
from kube.errors import KubeError, NotFound, Unavailable

log = logging.getLogger(__name__)

LABEL_TRUE: Final = "true"
DEPRECATED_SECRET_LABEL: Final = EventReason.DEPRECATED_SECRET_LABEL


class SecretCapability(StrEnum):
    """What a Secret is read for; the value is the label it must carry (``"true"``)."""

    API_KEY = "decisionmodel.io/api-key"
    EVAL_DATASET = "decisionmodel.io/eval-dataset"
    DOWNLOAD_TOKEN = "decisionmodel.io/download-token"


_FIELD: Final = {
    SecretCapability.API_KEY: "spec.auth.apiKeySecretRef",
    SecretCapability.EVAL_DATASET: "spec.rollout.evaluation.datasetRef.secretRef",
    SecretCapability.DOWNLOAD_TOKEN: "spec.cache.downloadTokenSecretRef",
}


def _missing(capability: SecretCapability, message: str) -> DmrolloutError:
    if capability is SecretCapability.API_KEY:
        return APIKeyInvalid(message)
    if capability is SecretCapability.EVAL_DATASET:
        return DatasetNotFound(message)
    return SecretNotFound(message)


def parse_api_key(raw: bytes, namespace: str, ref: KeyRef) -> str:
    """The API key in a Secret value, or APIKeyInvalid naming the Secret and the field.

    An empty value is transient (the user is about to fill it, as for a missing key); a value
    that cannot be an HTTP header (not UTF-8, non-ASCII, control characters) is permanent:
    every attempt would fail the same way. Neither message quotes a character or a position.
    """
    where = f"Secret {namespace}/{ref.name} key {ref.key!r} (spec.auth.apiKeySecretRef)"
    try:
        # The key travels in an HTTP header: surrounding whitespace (a trailing newline
        # from `kubectl create secret --from-file`) cannot be part of a valid header value.
        key = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        key = None
    if key == "":
        raise APIKeyInvalid(f"{where} is empty; put the engine API key in it")
    if key is None or not header_safe(key):
        raise APIKeyInvalid(
            f"{where} is not a usable API key: it must be {KEY_RULE}; write the key again "
            "(kubectl create secret generic --from-literal) and retry the rollout (annotate "
            "decisionmodel.io/retry)",
            permanent=True,
        )
    return key


@dataclass(frozen=True, slots=True)
class SecretValue:
    """One key's value and the uid of the Secret that holds it (never serialised)."""

    value: bytes = field(repr=False)
    uid: str


class SecretReader:
    """Labelled-Secret and dataset reads through the Kube door (blocking calls off the loop)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def read(
        self,
        namespace: str,
        ref: KeyRef,
        capability: SecretCapability,
        dm: DMRef | None = None,
    ) -> bytes:
        """The value of ``ref`` (a Secret key) once the capability label is checked."""
        return (await self.read_entry(namespace, ref, capability, dm)).value

    async def read_entry(
        self,
        namespace: str,
        ref: KeyRef,
        capability: SecretCapability,
        dm: DMRef | None = None,
    ) -> SecretValue:
        """:meth:`read`, with the Secret's uid (what the API-key checksum is keyed by)."""
        where = f"Secret {namespace}/{ref.name}"
        field = _FIELD[capability]
        try:
            body: dict[str, Any] = await Kube.run(
                self.kube.raw, self.kube.core.read_namespaced_secret, ref.name, namespace
            )
        except NotFound:
            raise _missing(
                capability,
                f"{where} referenced by {field} does not exist; create it with key "
                f'{ref.key!r} and the label {capability.value}: "true"',
            ) from None
        except Unavailable:
            raise
        except KubeError as e:
            raise SecretReadFailed(
                f"reading {where} failed: the API server answered {e.status} {e.reason}",
                status=e.status,
            ) from None
        labels: dict[str, str] = (body.get("metadata") or {}).get("labels") or {}
        if labels.get(capability.value) != LABEL_TRUE:
            legacy = (
                capability is SecretCapability.EVAL_DATASET
                and labels.get(SecretCapability.API_KEY.value) == LABEL_TRUE
            )
            if not legacy:
                raise SecretNotAllowed(
                    f"{where} referenced by {field} lacks the label {capability.value}: "
                    f'"true"; label it (kubectl label secret -n {namespace} {ref.name} '
                    f"{capability.value}=true) and the rollout picks it up on its next attempt"
                )
            await self._warn_deprecated_label(dm, where)
        data = body.get("data") or {}
        if ref.key not in data:
            raise _missing(
                capability,
                f"{where} referenced by {field} has no key {ref.key!r}; add the key or fix "
                "the reference",
            )
        uid = str((body.get("metadata") or {}).get("uid") or "")
        return SecretValue(value=base64.b64decode(data[ref.key]), uid=uid)

    async def api_key(self, namespace: str, ref: KeyRef | None) -> str | None:
        """The engine API key the runtime expects (None without ``spec.auth``)."""
        if ref is None:
            return None
        raw = await self.read(namespace, ref, SecretCapability.API_KEY)
        return parse_api_key(raw, namespace, ref)

    async def download_token(self, namespace: str, ref: KeyRef | None) -> str | None:
        if ref is None:
            return None
        raw = await self.read(namespace, ref, SecretCapability.DOWNLOAD_TOKEN)
        return raw.decode("utf-8", errors="replace").strip()

    async def dataset(self, namespace: str, ref: KeyRef, dm: DMRef | None = None) -> bytes:
        """The golden dataset bytes from a ConfigMap key or a labelled Secret key."""
        if ref.kind == "Secret":
            return await self.read(namespace, ref, SecretCapability.EVAL_DATASET, dm)
        where = f"ConfigMap {namespace}/{ref.name}"
        field = "spec.rollout.evaluation.datasetRef.configMapRef"
        try:
            value: bytes = await Kube.run(
                self.kube.read_config_map_value, namespace, ref.name, ref.key
            )
        except NotFound:
            raise DatasetNotFound(
                f"{where} referenced by {field} does not exist; create it with key {ref.key!r}"
            ) from None
        except Unavailable:
            raise
        except KubeError as e:
            raise SecretReadFailed(
                f"reading {where} failed: the API server answered {e.status} {e.reason}",
                status=e.status,
            ) from None
        except KeyError:
            raise DatasetNotFound(
                f"{where} referenced by {field} has no key {ref.key!r} (in data or binaryData)"
            ) from None
        return value

    async def _warn_deprecated_label(self, dm: DMRef | None, where: str) -> None:
        if dm is None:
            return
        note = (
            f"{where} is used as an evaluation dataset with only the label "
            f'{SecretCapability.API_KEY.value}: "true"; label it '
            f'{SecretCapability.EVAL_DATASET.value}: "true" (the old label stops working in a '
            "later release)"
        )
        try:
            await Kube.run(self.kube.emit_event, dm, DEPRECATED_SECRET_LABEL, note, "Warning")
        except KubeError as e:  # an Event is advice; never fail the read for it
            log.warning("could not emit %s: %s", DEPRECATED_SECRET_LABEL, e.status)
