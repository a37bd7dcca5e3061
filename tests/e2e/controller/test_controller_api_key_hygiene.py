"""A non-ASCII API key ends as APIKeyInvalid at once, with nothing of the key anywhere
(issue 12, point 5).

Before: the key passed ``parse_api_key``; httpx raised ``UnicodeEncodeError ... character
'\\xe9' in position 18`` outside the typed-error wrapper, so the character and its position
reached the failure, the Pods' gate messages, status and Events, and the step retried until
StartTimeout. Now the start step refuses the key before any Pod exists (permanent), and the
controller's steady state refuses a stable's key rotated to one (Degraded, APIKeyInvalid).
"""

from __future__ import annotations

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness
from test_controller import phase, workflows_of
from test_history_secrets import searchable

BAD_KEY = "sk-zq9-caf\u00e9-key"
# What must appear nowhere: the key, its character (raw or escaped), a position, the class
# of the untyped error.
NEVER = ["zq9", "\u00e9", "\\u00e9", "\\xe9", "position", "UnicodeEncodeError", "ordinal"]


def leaks(text: str) -> list[str]:
    return [s for s in NEVER if s in text]


async def visible_text(h: RolloutHarness, name: str) -> str:
    """Status, Events and every workflow history of the DecisionModel (payloads decoded)."""
    texts = [h.kubectl("get", "dm", name, "-o", "json"), h.kubectl("get", "events", "-o", "json")]
    for wf in await workflows_of(h, name):
        history = await h.client.get_workflow_handle(wf).fetch_history()
        texts.append(searchable(history.to_json()))
    return "\n".join(texts)


async def test_a_non_ascii_key_fails_the_rollout_as_api_key_invalid_without_echo(
    ctl: RolloutHarness,
) -> None:
    ctl.api_key_secret("key", BAD_KEY)
    auth = {"apiKeySecretRef": {"name": "key", "key": "token"}}
    ctl.create_dm("nonascii", {"model": "laya:en", "auth": auth})
    # Permanent: failed at the start step, not retried until the 10-minute StartTimeout.
    await eventually(lambda: phase(ctl, "nonascii") == "Failed", 90, what="Failed")
    promoted = ctl.condition("nonascii", "Promoted")
    assert (promoted["status"], promoted["reason"]) == ("False", "APIKeyInvalid"), promoted
    # The message names the reference and the fix.
    assert f"Secret {ctl.namespace}/key key 'token'" in promoted["message"]
    assert "printable ASCII" in promoted["message"]
    assert (ctl.status("nonascii").get("failedRevision") or {}).get("reason") == "APIKeyInvalid"
    assert leaks(await visible_text(ctl, "nonascii")) == []


async def test_a_stable_key_rotated_to_non_ascii_is_degraded_api_key_invalid(
    ctl: RolloutHarness,
) -> None:
    ctl.api_key_secret("key", "good-key-value")
    auth = {"apiKeySecretRef": {"name": "key", "key": "token"}}
    ctl.create_dm("rotated", {"model": "laya:en", "auth": auth})
    await eventually(lambda: phase(ctl, "rotated") == "Ready", 90, what="Ready")
    ctl.api_key_secret("key", BAD_KEY)
    # No Secret watch: picked up on the next re-check (10 s in these tests).
    degraded = await eventually(
        lambda: (c := ctl.condition("rotated", "Degraded")).get("reason") == "APIKeyInvalid" and c,
        60,
        what="Degraded APIKeyInvalid",
    )
    assert "printable ASCII" in degraded["message"]
    assert leaks(await visible_text(ctl, "rotated")) == []
