"""ServiceAccount tokens for the secure-metrics tests: one that may create reviews (bound to the
shipped dmrollout-metrics-auth ClusterRole), one bound to the shipped dmrollout-metrics-reader,
one authenticated and bound to nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import yaml

from harness.shipped import kustomize
from localenv.cluster import LocalCluster
from localenv.paths import REPO_ROOT

SHIPPED = REPO_ROOT / "deploy" / "metrics-auth"
ROLES = ("dmrollout-metrics-auth", "dmrollout-metrics-reader")


@dataclass(frozen=True)
class Tokens:
    reviewer: str
    reader: str
    stranger: str


@contextmanager
def metrics_tokens(cluster: LocalCluster) -> Iterator[Tokens]:
    for name in ("metrics_auth_role.yaml", "metrics_reader_role.yaml"):
        cluster.apply(yaml.safe_load((SHIPPED / name).read_text()))
    # The components run as their own ServiceAccounts here (localenv/identities.py): bind them
    # to the review rights as the shipped binding does, or every scrape has no verdict (500).
    cluster.apply(kustomize("deploy/metrics-auth"))
    ns = f"metrics-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", ns)
    for sa in ("reviewer", "reader", "stranger"):
        cluster.kubectl("create", "serviceaccount", sa, "-n", ns)
    for role, sa in zip(ROLES, ("reviewer", "reader"), strict=True):
        cluster.kubectl(
            "create", "clusterrolebinding", f"{role}-{ns}", f"--clusterrole={role}",
            f"--serviceaccount={ns}:{sa}",
        )  # fmt: skip

    def token(sa: str) -> str:
        return cluster.kubectl("create", "token", sa, "-n", ns).stdout.strip()

    try:
        yield Tokens(token("reviewer"), token("reader"), token("stranger"))
    finally:
        for role in ROLES:
            cluster.kubectl("delete", "clusterrolebinding", f"{role}-{ns}", check=False)
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
