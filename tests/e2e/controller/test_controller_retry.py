"""The documented fix for a failed revision works: a retry after the tag moved resolves the
tag again instead of reusing the digest that failed (issue 11, point 2)."""

from __future__ import annotations

import uuid

import httpx
from harness.helpers import eventually
from harness.rollout_harness import REGISTRY_URL, RolloutHarness, put_model


async def test_retry_after_a_moved_tag_resolves_again_and_promotes(ctl: RolloutHarness) -> None:
    repo = f"mv-{uuid.uuid4().hex[:8]}"
    put_model(repo, "v1", revision=repo)
    fault = f"{REGISTRY_URL}/_sim/faults/library/{repo}/v1"
    with httpx.Client(trust_env=False) as c:
        # The first manifest read (resolve) sees the catalogued bytes, every later read (the
        # prefetch's check, a new resolve) the moved ones: the tag moved mid-rollout, for good.
        c.put(fault, json={"tag_moved": True}).raise_for_status()
    try:
        ctl.create_dm("moved", {"model": f"{repo}:v1"})
        failed = await eventually(
            lambda: ctl.status("moved").get("failedRevision"), 120, what="failed on the move"
        )
        assert failed["reason"] == "DigestMismatch" and "tag moved" in failed["message"]
        ctl.kubectl("annotate", "dm", "moved", "decisionmodel.io/retry=after-move")
        await eventually(lambda: ctl.status("moved").get("phase") == "Ready", 120, what="Ready")
        stable = ctl.status("moved")["stableRevision"]
        assert stable["digest"] != failed["digest"]
        assert "failedRevision" not in ctl.status("moved")
    finally:
        with httpx.Client(trust_env=False) as c:
            c.delete(fault)
