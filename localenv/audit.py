"""Read the local API server's audit log: what each of dmrollout's ServiceAccounts really did.

``python -m localenv.audit <audit.log>`` prints the table per account (verb, resource, scope,
answers), the evidence the shipped Roles are derived from (docs/rbac.md).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAMESPACED = "namespaced"
CLUSTER = "cluster"


@dataclass(frozen=True, order=True)
class Use:
    """One kind of request: the unit RBAC grants (group, resource[/subresource], verb) and
    whether it was made in a namespace or across the cluster."""

    group: str
    resource: str
    verb: str
    scope: str

    def __str__(self) -> str:
        group = self.group or "core"
        return f"{self.verb:<7} {group}/{self.resource} ({self.scope})"


@dataclass(frozen=True)
class Request:
    user: str
    use: Use
    code: int
    namespace: str | None
    # The authorizer's decision (annotation authorization.k8s.io/decision). A 403 alone is not a
    # missing grant: admission refuses with 403 too (e.g. growing a PVC whose StorageClass does
    # not allow expansion), after RBAC allowed the request.
    authorized: bool


def _use(event: dict[str, Any]) -> Use | None:
    ref = event.get("objectRef") or {}
    resource = ref.get("resource")
    if not resource:  # a non-resource URL (/healthz, /version, discovery)
        return None
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    scope = NAMESPACED if ref.get("namespace") else CLUSTER
    return Use(ref.get("apiGroup") or "", resource, str(event["verb"]), scope)


def requests(lines: Iterable[str]) -> Iterator[Request]:
    """The completed (or, for a watch, started) requests of the log, one per request."""
    seen: set[str] = set()
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        if event.get("stage") not in ("ResponseStarted", "ResponseComplete"):
            continue
        if event["auditID"] in seen:
            continue
        use = _use(event)
        if use is None:
            continue
        seen.add(event["auditID"])
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        ns = (event.get("objectRef") or {}).get("namespace")
        decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
        yield Request(event["user"]["username"], use, code, ns, decision != "forbid")


def read(path: Path) -> list[Request]:
    if not path.exists():
        return []
    with path.open() as f:
        return list(requests(f))


def uses_by_user(reqs: Iterable[Request]) -> dict[str, set[Use]]:
    """What each user did, whatever the answer (a 403 is a use the RBAC lacks)."""
    table: dict[str, set[Use]] = defaultdict(set)
    for r in reqs:
        table[r.user].add(r.use)
    return dict(table)


def forbidden(reqs: Iterable[Request]) -> list[Request]:
    """The requests RBAC refused: used, and not granted."""
    return [r for r in reqs if not r.authorized]


def main(argv: list[str]) -> int:  # pragma: no cover - a manual tool
    reqs = read(Path(argv[1]))
    counts: dict[tuple[str, Use], int] = defaultdict(int)
    for r in reqs:
        counts[(r.user, r.use)] += 1
    for user, uses in sorted(uses_by_user(reqs).items()):
        print(user)
        for use in sorted(uses, key=lambda u: (u.group, u.resource, u.verb, u.scope)):
            print(f"  {use}  x{counts[(user, use)]}")
    denied = forbidden(reqs)
    print(f"{len(reqs)} requests, {len(denied)} forbidden by RBAC")
    for r in denied:
        print(f"  forbidden {r.user} {r.use} ns={r.namespace}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv))
