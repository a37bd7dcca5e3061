"""What Cached says while a revision's store PVC of the same name is still being deleted."""

from __future__ import annotations

from typing import Any

from decisionmodel.rollout.store_wait import MAX_NAMED, pods_mounting, store_wait_message


def pod(name: str, *claims: str) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    volumes += [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return {"metadata": {"name": name}, "spec": {"volumes": volumes}}


def test_only_the_pods_that_mount_the_claim_are_named_in_order() -> None:
    pods = [
        pod("z", "s-1"),
        pod("a", "other", "s-1"),
        pod("m", "other"),
        {"metadata": {"name": "x"}},
    ]
    assert pods_mounting(pods, "s-1") == ["a", "z"]
    assert pods_mounting(pods, "none") == []


def test_held_by_pods_the_message_names_them_and_the_command_that_frees_the_claim() -> None:
    message = store_wait_message("team", "dm-store-abc", ["p1", "p2"], {"metadata": {}})
    assert "dm-store-abc" in message and "still being deleted" in message
    assert "kubectl delete pod -n team p1 p2" in message
    assert "timeouts.caching" in message


def test_many_holders_are_counted_not_all_named() -> None:
    holders = [f"p{i}" for i in range(MAX_NAMED + 3)]
    message = store_wait_message("team", "c", holders, None)
    assert f"p{MAX_NAMED - 1}" in message and f"p{MAX_NAMED}" not in message
    assert "and 3 more" in message


def test_held_by_no_pod_the_message_names_the_finalizers_and_where_to_look() -> None:
    pvc = {"metadata": {"finalizers": ["kubernetes.io/pvc-protection", "example.com/backup"]}}
    message = store_wait_message("team", "c", [], pvc)
    assert "kubernetes.io/pvc-protection, example.com/backup" in message
    assert "kubectl describe pvc -n team c" in message
    assert "finalizers" not in store_wait_message("team", "c", [], None)
