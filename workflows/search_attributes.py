"""Typed search attributes of a rollout workflow.

They make the Temporal UI and ``temporal workflow list --query`` answer "all rollouts of
support-router" (``DmName = 'support-router'``) or "all failed rollouts"
(``DmResult = 'Failed'``). A namespace must have them registered before a worker runs
(``dmrollout temporal setup``; the local dev server registers them at start).
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

DM_NAMESPACE = SearchAttributeKey.for_keyword("DmNamespace")
DM_NAME = SearchAttributeKey.for_keyword("DmName")
DM_REVISION = SearchAttributeKey.for_keyword("DmRevision")
DM_MODEL = SearchAttributeKey.for_keyword("DmModel")
DM_PHASE = SearchAttributeKey.for_keyword("DmPhase")
DM_RESULT = SearchAttributeKey.for_keyword("DmResult")

ALL: tuple[SearchAttributeKey[str], ...] = (
    DM_NAMESPACE,
    DM_NAME,
    DM_REVISION,
    DM_MODEL,
    DM_PHASE,
    DM_RESULT,
)


def cli_registrations() -> list[str]:
    """``name=Keyword`` pairs for ``temporal server start-dev --search-attribute``."""
    return [f"{k.name}=Keyword" for k in ALL]
