"""Log lines for people (``text``) or for a log pipeline (``json``), each naming the
DecisionModel, revision and workflow ID it is about when there is one.

Where the names come from: an activity's own info (its workflow ID is
``rollout/<ns>/<name>/<revision>[/<retry>]``), the Temporal SDK's ``temporal_workflow`` extra on
workflow log records, or the DecisionModel a controller reconcile is working on (a context
variable, set per reconcile task).
"""

from __future__ import annotations

import contextvars
import json
import logging
from datetime import UTC, datetime
from typing import Any, Final

from temporalio import activity

from decisionmodel.rollout.contracts import STORE_WORKFLOW_ID_PREFIX, WORKFLOW_ID_PREFIX

LOG_FORMATS: Final = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s %(message)s"

# The DecisionModel ("<ns>/<name>") a controller reconcile works on; None elsewhere.
current_dm: contextvars.ContextVar[str | None] = contextvars.ContextVar("dm", default=None)


def ids_from_workflow_id(workflow_id: str) -> dict[str, str]:
    """DecisionModel and revision from a rollout's or store recovery's workflow ID."""
    parts = workflow_id.split("/")
    if len(parts) >= 4 and parts[0] in (WORKFLOW_ID_PREFIX, STORE_WORKFLOW_ID_PREFIX):
        return {"dm": f"{parts[1]}/{parts[2]}", "revision": parts[3], "workflowId": workflow_id}
    return {"workflowId": workflow_id}


class ContextFilter(logging.Filter):
    """Adds ``dm``, ``revision`` and ``workflowId`` to a record when it is about one."""

    def filter(self, record: logging.LogRecord) -> bool:
        found: dict[str, str] = {}
        workflow = getattr(record, "temporal_workflow", None)
        if isinstance(workflow, dict) and workflow.get("workflow_id"):
            found = ids_from_workflow_id(str(workflow["workflow_id"]))
        elif activity.in_activity():
            found = ids_from_workflow_id(activity.info().workflow_id or "")
        elif (dm := current_dm.get()) is not None:
            found = {"dm": dm}
        record.dmrollout = found
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **getattr(record, "dmrollout", {}),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx says every request at INFO: each watch of the controller every 240 s, each probe of
    # a Pod every 60 s. A failure is dmrollout's to say, with what it means.
    logging.getLogger("httpx").setLevel(max(level, logging.WARNING))


def add_log_flag(p: Any) -> None:
    p.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=None,
        help="text (default) or json: one object per line with dm, revision, workflowId "
        "(env DMROLLOUT_LOG_FORMAT)",
    )


def log_format(args: Any) -> str:
    """``--log-format``, else DMROLLOUT_LOG_FORMAT (RolloutSettings.log_format)."""
    from decisionmodel.rollout.settings import RolloutSettings

    return str(getattr(args, "log_format", None) or RolloutSettings().log_format)
