"""Reading the API server's audit log (localenv/audit.py): one use per request, the scope, and
RBAC's refusals told apart from admission's 403s."""

from __future__ import annotations

import json
from typing import Any

from localenv import audit

WORKER = "system:serviceaccount:dmrollout-system:dmrollout-worker"


def event(
    audit_id: str,
    verb: str,
    resource: str,
    *,
    stage: str = "ResponseComplete",
    namespace: str | None = "team-a",
    subresource: str | None = None,
    group: str = "",
    code: int = 200,
    decision: str = "allow",
) -> str:
    ref: dict[str, Any] = {"resource": resource, "apiGroup": group}
    if namespace:
        ref["namespace"] = namespace
    if subresource:
        ref["subresource"] = subresource
    return json.dumps(
        {
            "auditID": audit_id,
            "stage": stage,
            "verb": verb,
            "user": {"username": WORKER},
            "objectRef": ref,
            "responseStatus": {"code": code},
            "annotations": {"authorization.k8s.io/decision": decision},
        }
    )


def test_one_use_per_request_with_subresource_and_scope() -> None:
    lines = [
        event("a", "watch", "pods", stage="ResponseStarted"),
        event("a", "watch", "pods"),  # the same watch, completed later
        event("b", "patch", "pods", subresource="status"),
        event("c", "list", "deployments", group="apps", namespace=None),
        "",
    ]
    reqs = list(audit.requests(lines))
    assert [str(r.use) for r in reqs] == [
        "watch   core/pods (namespaced)",
        "patch   core/pods/status (namespaced)",
        "list    apps/deployments (cluster)",
    ]
    assert audit.uses_by_user(reqs)[WORKER] == {r.use for r in reqs}


def test_only_rbac_refusals_count_as_forbidden() -> None:
    lines = [
        event("a", "list", "secrets", code=403, decision="forbid"),
        # Admission refused this one (a PVC on a class without expansion): RBAC had allowed it.
        event("b", "patch", "persistentvolumeclaims", code=403, decision="allow"),
    ]
    (denied,) = audit.forbidden(audit.requests(lines))
    assert denied.use == audit.Use("", "secrets", "list", audit.NAMESPACED)


def test_non_resource_requests_are_left_out() -> None:
    line = json.dumps(
        {
            "auditID": "x",
            "stage": "ResponseComplete",
            "verb": "get",
            "user": {"username": WORKER},
            "requestURI": "/version",
        }
    )
    assert list(audit.requests([line])) == []
