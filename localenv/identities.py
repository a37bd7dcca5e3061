"""dmrollout's components as their own ServiceAccounts in the local cluster.

In a cluster the controller and the workers reach the API server with the tokens of their
ServiceAccounts, and RBAC decides what each may do. Locally they used the admin certificate
(group system:masters), which RBAC never refuses, so a missing grant could not fail a test and
the audit log could not tell the components apart. Here each component gets a kubeconfig holding
a token of its ServiceAccount from the TokenRequest API (what ``kubectl create token`` calls):
the API server authenticates it as ``system:serviceaccount:dmrollout-system:<name>``, exactly
the user a Pod of the chart would be, and authorizes it with the Roles bound to that account.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import yaml

SYSTEM_NAMESPACE = "dmrollout-system"
CONTROLLER = "dmrollout-controller"
WORKER = "dmrollout-worker"
COMPONENTS = (CONTROLLER, WORKER)
# Long enough for any test session; the API server caps nothing here (no
# --service-account-max-token-expiration).
TOKEN_SECONDS = 48 * 3600


def username(account: str, namespace: str = SYSTEM_NAMESPACE) -> str:
    """The user the API server (and its audit log) sees for a ServiceAccount token."""
    return f"system:serviceaccount:{namespace}:{account}"


class Kubectl(Protocol):
    """What is needed of LocalCluster (kept structural: no import cycle with cluster.py)."""

    kubeconfig: Path

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> object: ...


def ensure_service_account(cluster: Kubectl, account: str) -> None:
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": SYSTEM_NAMESPACE},
        },
    ]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def service_account_kubeconfig(cluster: Kubectl, account: str, path: Path) -> Path:
    """Write a kubeconfig for ``account`` (created if missing) next to the admin one."""
    ensure_service_account(cluster, account)
    result = cluster.kubectl(
        "-n", SYSTEM_NAMESPACE, "create", "token", account, f"--duration={TOKEN_SECONDS}s"
    )
    token = str(getattr(result, "stdout", "")).strip()
    if not token:
        raise RuntimeError(f"no token issued for the ServiceAccount {account}")
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [
            {
                "name": account,
                "context": {"cluster": admin["clusters"][0]["name"], "user": account},
            }
        ],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    return path
