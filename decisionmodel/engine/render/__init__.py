"""Pure renderers of the ollaya engine: params in, Kubernetes objects (plain dicts in wire
format, deterministic key order) out. No I/O, no CRD types, no Kubernetes client."""

from __future__ import annotations

from decisionmodel.engine.render.deployment import render_serving_deployment
from decisionmodel.engine.render.pdb import render_pdb
from decisionmodel.engine.render.prefetch_job import render_prefetch_job
from decisionmodel.engine.render.pvc import render_store_pvc
from decisionmodel.engine.render.service import render_service

__all__ = [
    "render_pdb",
    "render_prefetch_job",
    "render_service",
    "render_serving_deployment",
    "render_store_pvc",
]
