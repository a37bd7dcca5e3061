"""Why a revision's store PVC cannot be created yet (pure): a namesake is still being deleted.

A revision rolled out again (v1 → v3 → v1, an undo, a rollback-to) gets the store PVC name it
had before. When the earlier clean-up's delete has not finished, the prefetch waits for it to
go. Most such waits last a moment; one held by a Pod that still mounts the claim (the
``kubernetes.io/pvc-protection`` finalizer: a Pod someone left, a Pod garbage collection has
not reached) lasts until that Pod ends, and waiting silently until ``timeouts.caching`` hid it
(explorer seed 10026). The prefetch shows this message on Cached (reason StoreTerminating, as
the stable's own store says it) from its first look, naming the Pods and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

# Pods named in the message; the rest are counted.
MAX_NAMED: Final = 5
DEADLINE: Final = "spec.rollout.timeouts.caching (CacheTimeout)"


def pods_mounting(pods: Iterable[dict[str, Any]], claim: str) -> list[str]:
    """The names of the Pods whose volumes reference the PersistentVolumeClaim ``claim``."""
    names = []
    for pod in pods:
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            if ((volume or {}).get("persistentVolumeClaim") or {}).get("claimName") == claim:
                names.append(str(pod["metadata"]["name"]))
                break
    return sorted(names)


def store_wait_message(namespace: str, claim: str, holders: list[str], pvc: Any) -> str:
    """What Cached says while the prefetch waits for the namesake PVC ``claim`` to go.
    ``pvc``: the PVC as read now (None: gone since the last attempt)."""
    head = (
        f"the model store PVC {claim} of this revision is still being deleted (an earlier "
        "clean-up of the same revision); the prefetch creates it anew once it is gone"
    )
    if holders:
        named = " ".join(holders[:MAX_NAMED])
        more = f" and {len(holders) - MAX_NAMED} more" if len(holders) > MAX_NAMED else ""
        return (
            f"{head}. Pod(s) {named}{more} still mount it (kubernetes.io/pvc-protection): "
            f"delete them (kubectl delete pod -n {namespace} {named}) or let them end; the "
            f"wait ends at {DEADLINE}"
        )
    finalizers = ((pvc or {}).get("metadata") or {}).get("finalizers") or []
    held = f" (finalizers: {', '.join(map(str, finalizers))})" if finalizers else ""
    return (
        f"{head}{held}. No Pod mounts it; if it stays, see why with kubectl describe pvc -n "
        f"{namespace} {claim}; the wait ends at {DEADLINE}"
    )
