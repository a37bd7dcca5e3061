"""The hub's part of a pipeline run (issue 25): pin the freight once, and show the run on the
DecisionModelPipeline.

``resolve_freight`` resolves the template's tag to a digest with the hub's registry settings
and guards (the allowed registries), once per run: every stage then rolls out that digest,
whatever the tag does later. ``record_status`` applies the run's fields of the pipeline's
status (its own field manager; the UID guards against a re-created namesake).
"""

from __future__ import annotations

from temporalio import activity

from activities.typed_errors import typed_errors
from decisionmodel.engine.names import check_registry_allowed, parse_model_name
from decisionmodel.engine.resolver import RegistryResolver
from decisionmodel.errors import ResourceConflict
from decisionmodel.pipeline.contracts import (
    RECORD_PIPELINE,
    RESOLVE_FREIGHT,
    Freight,
    PipelineRecord,
    ResolveFreightInput,
)
from decisionmodel.pipeline.status import run_status
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from kube.errors import Conflict, NotFound
from kube.pipelines import PIPELINE_STATUS_MANAGER, apply_pipeline_status


class PipelineHubActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings) -> None:
        self.kube = kube
        self.settings = settings

    @activity.defn(name=RESOLVE_FREIGHT)
    async def resolve_freight(self, inp: ResolveFreightInput) -> Freight:
        async with typed_errors():
            settings = self.settings
            ref = parse_model_name(inp.model, default_registry=settings.ollaya_registry)
            check_registry_allowed(
                ref, settings.allowed_registries, settings.allow_insecure_registries
            )
            async with RegistryResolver(
                allowed_registries=settings.allowed_registries,
                allow_insecure=settings.allow_insecure_registries,
            ) as resolver:
                resolved = await resolver.resolve(ref)
            return Freight(model=inp.model, digest=resolved.digest)

    @activity.defn(name=RECORD_PIPELINE)
    async def record_status(self, record: PipelineRecord) -> None:
        ref = record.pipeline
        async with typed_errors():
            try:
                await Kube.run(
                    apply_pipeline_status,
                    self.kube,
                    ref.namespace,
                    ref.name,
                    ref.uid,
                    run_status(record),
                    PIPELINE_STATUS_MANAGER,
                )
            except (NotFound, Conflict):
                # Deleted or re-created: nothing to show it on (the controller cancels the run).
                raise ResourceConflict(
                    f"DecisionModelPipeline {ref.namespace}/{ref.name} is gone or was re-created",
                    permanent=True,
                ) from None
