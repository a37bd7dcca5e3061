"""Only a revision's own Pods are probed (issue 11, point 7): labelled for it and controlled by
a ReplicaSet of its Deployment; a Pod that merely carries the labels gets neither the API key
nor a place in the ready count."""

from __future__ import annotations

from typing import Any

from kube.client import Kube, revision_replica_set

LABELS = {"decisionmodel.io/name": "m", "decisionmodel.io/revision": "abc"}


def pod(
    name: str, owner: dict[str, Any] | None, template_hash: str | None = "7f9c"
) -> dict[str, Any]:
    labels = dict(LABELS)
    if template_hash:
        labels["pod-template-hash"] = template_hash
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta}


def rs(name: str, controller: bool = True, kind: str = "ReplicaSet") -> dict[str, Any]:
    return {"kind": kind, "name": name, "controller": controller, "uid": "u"}


def test_the_deployment_of_a_pods_replica_set() -> None:
    assert revision_replica_set(pod("a", rs("m-abc-7f9c"))) == "m-abc"
    assert revision_replica_set(pod("b", None)) is None
    assert revision_replica_set(pod("c", rs("m-abc-7f9c", controller=False))) is None
    assert revision_replica_set(pod("d", rs("m-abc-7f9c", kind="StatefulSet"))) is None
    assert revision_replica_set(pod("e", rs("m-abc-0000"))) is None  # another template hash
    assert revision_replica_set(pod("f", rs("m-abc-7f9c"), template_hash=None)) is None


class ListingKube(Kube):
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods

    def list_pods(self, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
        assert selector == LABELS
        return self.pods


def test_only_the_revisions_own_pods_are_listed() -> None:
    own = pod("own", rs("m-abc-7f9c"))
    impostor = pod("impostor", None)
    other = pod("other", rs("someone-else-7f9c"))
    kube = ListingKube([own, impostor, other])
    assert kube.list_revision_pods("ns", "m", "abc") == [own]
