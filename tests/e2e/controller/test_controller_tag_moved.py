"""A moved tag is followed (issue 22): after a tag is re-published upstream, the next revision
of a DecisionModel that names the tag resolves it again and serves the new digest; the stable
keeps its recorded digest until then, and an unchanged spec starts nothing."""

from __future__ import annotations

import uuid

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness, put_model


async def test_a_republished_tag_is_resolved_again_by_the_next_revision(
    ctl: RolloutHarness,
) -> None:
    repo = f"moved-{uuid.uuid4().hex[:8]}"
    first = put_model(repo, "v1", revision="first")
    ctl.create_dm("moved", {"model": f"{repo}:v1"})
    await eventually(lambda: ctl.status("moved").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("moved")["stableRevision"]
    assert stable["digest"].removeprefix("sha256:") == first.removeprefix("sha256:")

    second = put_model(repo, "v1", revision="second")
    assert second != first
    # A change that makes a new revision (resources), not a digest pin.
    ctl.update_spec("moved", {"resources": {"requests": {"cpu": "200m"}}})

    def serving_the_new_digest() -> bool:
        status = ctl.status("moved")
        now = status.get("stableRevision") or {}
        failed = status.get("failedRevision")
        assert failed is None, failed
        return now.get("hash") != stable["hash"] and status.get("phase") == "Ready"

    await eventually(serving_the_new_digest, 180, what="the new revision promoted")
    now = ctl.status("moved")["stableRevision"]
    assert now["digest"].removeprefix("sha256:") == second.removeprefix("sha256:")
