"""Issue 13, point 5: JSON log lines name the DecisionModel, revision and workflow ID."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from controller.serve.logs import ContextFilter, JsonFormatter, current_dm, ids_from_workflow_id


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("test.logs")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    yield out
    log.removeHandler(handler)


def last(out: io.StringIO) -> dict[str, str]:
    parsed: dict[str, str] = json.loads(out.getvalue().strip().splitlines()[-1])
    return parsed


def test_a_reconcile_line_names_its_decision_model(lines: io.StringIO) -> None:
    token = current_dm.set("team-a/router")
    try:
        logging.getLogger("test.logs").info("reconciled")
    finally:
        current_dm.reset(token)
    line = last(lines)
    assert line["dm"] == "team-a/router" and line["message"] == "reconciled"
    assert line["level"] == "INFO" and "time" in line


def test_a_workflow_line_names_dm_revision_and_workflow(lines: io.StringIO) -> None:
    logging.getLogger("test.logs").info(
        "step", extra={"temporal_workflow": {"workflow_id": "rollout/team-a/router/abc123/9f"}}
    )
    line = last(lines)
    assert (line["dm"], line["revision"]) == ("team-a/router", "abc123")
    assert line["workflowId"] == "rollout/team-a/router/abc123/9f"


async def test_an_activity_line_names_its_rollout(lines: io.StringIO) -> None:
    @activity.defn
    async def step() -> None:
        logging.getLogger("test.logs").info("inside")

    env = ActivityEnvironment()
    env.info = env.info.__class__(
        **{**env.info.__dict__, "workflow_id": "rollout/ns/dm/rev1"}  # type: ignore[arg-type]
    )
    await env.run(step)
    assert last(lines)["revision"] == "rev1"


def test_other_lines_carry_no_ids(lines: io.StringIO) -> None:
    logging.getLogger("test.logs").warning("plain")
    assert set(last(lines)) == {"time", "level", "logger", "message"}
    assert ids_from_workflow_id("other") == {"workflowId": "other"}
