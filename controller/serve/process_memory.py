"""Memory of the long-running processes (worker, controller): fewer malloc arenas, and no
import of what they never run.

glibc gives each thread that allocates its own arena, up to 8 per core: the worker runs the
Temporal SDK's native threads and one thread per concurrent activity, and freed memory in one
arena cannot serve another, so resident memory grows with the thread count rather than with the
work (issue 14: controller + worker < 400 MB at 1,000 DecisionModels). Two arenas is the usual
setting for threaded Python services; it must be set before the threads start, so each command
calls this first. ``MALLOC_ARENA_MAX`` in the environment, if set, wins (glibc read it already).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

log = logging.getLogger("dmrollout.process")

M_ARENA_MAX = -8  # from glibc's malloc.h
ARENAS = 2


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas; False where there is no glibc (musl, macOS) or it is set."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = bool(mallopt(M_ARENA_MAX, arenas))
    log.debug("malloc arenas capped at %d: %s", arenas, applied)
    return applied


def skip_httpx_cli() -> None:
    """httpx imports its command-line client (and with it rich, click and pygments, ~5 MiB)
    whenever those happen to be installed, as in a development environment; the worker and the
    controller never run it. A None in sys.modules makes that import fail, and httpx then
    leaves its CLI out (its own fallback). Call before anything imports httpx."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


__all__ = ["limit_malloc_arenas", "skip_httpx_cli"]
