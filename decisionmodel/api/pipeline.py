"""The `DecisionModelPipeline` spec (`decisionmodel.io/v1alpha1`, short name `dmp`; issue 25).

A pipeline lives on one cluster, the hub, and carries one revision of a DecisionModel through
stages: a stage names a cluster (whose own worker does the stage's work, polling the task queue
``dmrollout-stage-<cluster>``), a namespace, the stages it depends on, a soak, its approval and
its change windows. Like ``spec.py``, these models are the single source of the CRD's schema and
CEL rules; what CEL cannot say (a dependency cycle) is refused here with the field named, and
the pipeline controller shows it without applying anything to any cluster.
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Annotated, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ConfigDict, Field, field_validator, model_validator

from decisionmodel.api.spec import (
    DURATION_PATTERN,
    DecisionModelSpec,
    DurationError,
    WireModel,
    cel_rule,
    cel_rules,
    parse_duration,
)

PIPELINE_KIND: Final = "DecisionModelPipeline"
PIPELINE_LIST_KIND: Final = "DecisionModelPipelineList"
PIPELINE_PLURAL: Final = "decisionmodelpipelines"
PIPELINE_SINGULAR: Final = "decisionmodelpipeline"
PIPELINE_SHORT_NAME: Final = "dmp"

MAX_STAGES: Final = 32
# A stage's cluster names its task queue; a DNS label keeps the queue name readable.
LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
CLOCK_PATTERN: Final = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
MAX_SOAK: Final = timedelta(days=30)
STAGE_QUEUE_PREFIX: Final = "dmrollout-stage-"

MSG_DEPENDS_ON_KNOWN: Final = "dependsOn names a stage that is not in spec.stages"
MSG_DEPENDS_ON_SELF: Final = "a stage cannot depend on itself"
MSG_SOAK_RANGE: Final = "soak must be a Go duration between 0s and 720h, e.g. 30m"
MSG_WINDOW_EMPTY: Final = (
    "a change window's start and end must differ (end before start: overnight)"
)


StageName = Annotated[str, Field(min_length=1, max_length=63, pattern=LABEL_PATTERN)]


def stage_task_queue(cluster: str) -> str:
    """The task queue the cluster's own worker polls for its stages' work."""
    return f"{STAGE_QUEUE_PREFIX}{cluster}"


class Approval(enum.StrEnum):
    """Who lets a stage start once its dependencies have soaked."""

    AUTOMATIC = "Automatic"
    MANUAL = "Manual"


class Weekday(enum.StrEnum):
    MON = "Mon"
    TUE = "Tue"
    WED = "Wed"
    THU = "Thu"
    FRI = "Fri"
    SAT = "Sat"
    SUN = "Sun"

    @property
    def weekday(self) -> int:
        """Monday 0 .. Sunday 6, as ``datetime.weekday()``."""
        return list(Weekday).index(self)


class ChangeWindow(WireModel):
    """When a stage may start: on these days, from start to end (local time of timeZone). An
    end before the start crosses midnight (22:00-02:00 on Fri is Friday night)."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(cel_rule("self.start != self.end", MSG_WINDOW_EMPTY))
    )

    days: list[Weekday] = Field(
        min_length=1, max_length=7, description="Days the window opens on: Mon .. Sun."
    )
    start: str = Field(pattern=CLOCK_PATTERN, max_length=5, description="Opening, HH:MM (24 h).")
    end: str = Field(pattern=CLOCK_PATTERN, max_length=5, description="Closing, HH:MM (24 h).")
    time_zone: str = Field(
        default="UTC",
        min_length=1,
        max_length=64,
        description="IANA time zone of start and end, e.g. Europe/Berlin.",
    )

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r}: use an IANA name such as UTC or Europe/Berlin"
            ) from None
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> ChangeWindow:
        if self.start == self.end:
            raise ValueError(MSG_WINDOW_EMPTY)
        return self

    def minutes(self) -> tuple[int, int]:
        """(start, end) in minutes after local midnight."""
        return _clock_minutes(self.start), _clock_minutes(self.end)


def _clock_minutes(text: str) -> int:
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


class Stage(WireModel):
    """One cluster and namespace the revision goes to, after the stages it depends on."""

    name: str = Field(
        min_length=1, max_length=63, pattern=LABEL_PATTERN, description="Unique in the pipeline."
    )
    cluster: str = Field(
        min_length=1,
        max_length=63,
        pattern=LABEL_PATTERN,
        description=(
            "The cluster whose worker does this stage: it polls the task queue "
            "dmrollout-stage-<cluster> (the chart's worker.stageCluster)."
        ),
    )
    namespace: str = Field(
        min_length=1, max_length=63, pattern=LABEL_PATTERN, description="Namespace there."
    )
    depends_on: list[StageName] = Field(
        default_factory=list,
        max_length=MAX_STAGES,
        description="Stages that must have promoted (and soaked) before this one starts.",
    )
    soak: str = Field(
        default="0s",
        pattern=DURATION_PATTERN,
        max_length=32,
        description=(
            "How long the revision must have served in every dependency before this stage "
            "starts (Go duration, at most 720h)."
        ),
    )
    approval: Approval = Field(
        default=Approval.AUTOMATIC,
        description="Manual: waits for `dmrollout pipeline promote <name> --stage <stage>`.",
    )
    windows: list[ChangeWindow] = Field(
        default_factory=list,
        max_length=16,
        description="Change windows; none: any time. A stage starts only inside one.",
    )

    @field_validator("soak")
    @classmethod
    def _soak_in_range(cls, value: str) -> str:
        try:
            soak = parse_duration(value)
        except DurationError:
            raise ValueError(MSG_SOAK_RANGE) from None
        if soak > MAX_SOAK:
            raise ValueError(MSG_SOAK_RANGE)
        return value

    @property
    def soak_time(self) -> timedelta:
        return parse_duration(self.soak)

    @property
    def task_queue(self) -> str:
        return stage_task_queue(self.cluster)


class PipelineTemplate(WireModel):
    """The DecisionModel every stage applies (its name, and its spec without the digest)."""

    name: str | None = Field(
        default=None,
        max_length=43,
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="The DecisionModel's name in every stage; default: the pipeline's name.",
    )
    spec: DecisionModelSpec = Field(description="A DecisionModel spec, as for kubectl apply.")


class DecisionModelPipelineSpec(WireModel):
    """A DecisionModel template and the stages its revisions go through."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel_rule(
                "self.stages.all(s, !has(s.dependsOn) || "
                "s.dependsOn.all(d, self.stages.exists(t, t.name == d)))",
                MSG_DEPENDS_ON_KNOWN,
                ".stages",
            ),
            cel_rule(
                "self.stages.all(s, !has(s.dependsOn) || !(s.name in s.dependsOn))",
                MSG_DEPENDS_ON_SELF,
                ".stages",
            ),
        )
    )

    template: PipelineTemplate = Field(description="What each stage applies.")
    stages: list[Stage] = Field(
        min_length=1,
        max_length=MAX_STAGES,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
        description="The stages, each naming its dependencies; independent ones run in parallel.",
    )

    @model_validator(mode="after")
    def _a_graph(self) -> DecisionModelPipelineSpec:
        problem = graph_problem(self.stages)
        if problem is not None:
            raise ValueError(problem)
        return self

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)


def graph_problem(stages: list[Stage]) -> str | None:
    """The first thing that keeps ``stages`` from being a dependency graph, naming the field."""
    names = [s.name for s in stages]
    for i, name in enumerate(names):
        if name in names[:i]:
            return f"spec.stages[{i}].name: duplicate stage name {name!r}; names must be unique"
    for i, s in enumerate(stages):
        for d in s.depends_on:
            if d == s.name:
                return f"spec.stages[{i}].dependsOn: {MSG_DEPENDS_ON_SELF} ({d!r})"
            if d not in names:
                return f"spec.stages[{i}].dependsOn: {MSG_DEPENDS_ON_KNOWN} ({d!r})"
    cycle = find_cycle(stages)
    if cycle:
        where = names.index(cycle[0])
        path = " -> ".join([*cycle, cycle[0]])
        return f"spec.stages[{where}].dependsOn: a dependency cycle ({path}); remove one edge"
    return None


def find_cycle(stages: list[Stage]) -> list[str]:
    """A cycle of dependencies as stage names (empty: none). Depth-first, in spec order."""
    deps = {s.name: [d for d in s.depends_on] for s in stages}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for d in deps.get(name, []):
            if state.get(d) == 1:
                return path[path.index(d) :]
            if d in deps and state.get(d) is None:
                found = visit(d)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return []

    for s in stages:
        if state.get(s.name) is None:
            found = visit(s.name)
            if found:
                return found
    return []
