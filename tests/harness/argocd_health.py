"""Argo CD's health check of a DecisionModel or DecisionModelPipeline, run as Argo CD runs it:
the ``health.lua`` of ``deploy/argocd/resource_customizations`` in a Lua 5.1 VM (Argo CD uses
gopher-lua, a Lua 5.1 implementation; lupa's ``lua51`` is the reference one) with the object as
the global ``obj``, the script's returned table read as ``status`` and ``message``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lupa.lua51 as lua51

CUSTOMIZATIONS = (
    Path(__file__).resolve().parents[2] / "deploy" / "argocd" / "resource_customizations"
)
GROUP = "decisionmodel.io"
# What Argo CD's VM opens for health scripts (argo-cd util/lua: OpenBase, OpenTable,
# OpenString, OpenMath; no io, no os): the rest is removed so a script using it fails here too.
_CLOSED = ("io", "os", "debug", "package", "require", "dofile", "loadfile", "load")


@dataclass(frozen=True)
class Health:
    status: str
    message: str


def script(kind: str) -> Path:
    return CUSTOMIZATIONS / GROUP / kind / "health.lua"


def health(obj: dict[str, Any]) -> Health:
    """The health Argo CD would show for ``obj`` (its ``kind`` picks the script)."""
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua_globals = runtime.globals()
    for name in _CLOSED:
        lua_globals[name] = None
    lua_globals.obj = runtime.table_from(obj, recursive=True)
    found = runtime.execute(script(obj["kind"]).read_text())
    return Health(str(found["status"]), str(found["message"] or ""))
