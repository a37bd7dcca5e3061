"""Fault injectors of the chaos matrix (``tests/chaos``, ``make chaos``; issue 10).

Each injector breaks one peer of a rollout and mends it: ``inject()`` and ``heal()``, both
blocking. :func:`fault_window` holds a fault for the length of a ``async with`` block and heals
it whatever happens inside (an exception, a cancelled test); :func:`run_fault` holds it for a
number of seconds. So no fault outlives the cell that injected it.

=================  ===========================================  ==================================
fault              inject                                       heal
=================  ===========================================  ==================================
ApiServerStopped   SIGTERM kube-apiserver (etcd, controllers,   start it with the same flags, port
                   kwok, the fake kubelet keep running)         and etcd; wait for ``/readyz``
TemporalStopped    stop the dev server; wait until its port     start it on the same SQLite file
                   is closed
RegistryErrors     every registry request (manifests, blobs)    clear the registry's faults
                   answers 500
SilentApiServer    the :class:`SilentProxy` in front of the     forward new connections again
                   API server goes silent
SilentRuntime      the runtime simulator's slow-answer faults   the namespace's earlier values
                   for the fault's whole length, on a namespace
ProcessKilled      SIGKILL a worker or controller process       start it again
OomKilled          the worker's memory limit set just above     lift the limit, start it again
                   its usage: the kernel's OOM killer ends it
RuntimeUnreachable the worker's packets to the Pod network      delete the rules
                   dropped (iptables, by its cgroup); the API
                   server, Temporal and everyone else unaffected
=================  ===========================================  ==================================

Everything here talks to 127.0.0.1 or the namespace-local Pod network (``hack/in-netns.sh``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import yaml

from localenv.cgroups import WorkerCgroup
from localenv.cluster import LocalCluster
from localenv.processes import wait_until
from localenv.temporal import TemporalDevServer
from simulators.pod_faults import PREFIX as SIM_PREFIX

T = TypeVar("T")


class Fault(Protocol):
    @property
    def name(self) -> str: ...

    def inject(self) -> None: ...

    def heal(self) -> None: ...


@dataclass
class FaultWindow:
    """When a fault was in place (``time.monotonic()``); ``cleared_at`` once healed."""

    fault: str
    injected_at: float = 0.0
    cleared_at: float | None = None


@contextlib.asynccontextmanager
async def fault_window(fault: Fault) -> AsyncIterator[FaultWindow]:
    """The fault is in place inside the block; healed on the way out, always.

    inject and heal run in a thread: starting an API server back takes seconds, and the
    event loop keeps probing the stable and polling the rollout meanwhile.
    """
    window = FaultWindow(fault.name)
    try:
        await asyncio.to_thread(fault.inject)
        window.injected_at = time.monotonic()
        yield window
    finally:
        await _uncancellable(asyncio.to_thread(fault.heal))
        window.cleared_at = time.monotonic()


async def run_fault(fault: Fault, seconds: float) -> FaultWindow:
    """Inject ``fault``, keep it for ``seconds``, heal it."""
    async with fault_window(fault) as window:
        await asyncio.sleep(seconds)  # the fault's length, not a wait for a condition
    return window


async def _uncancellable(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even when cancelled meanwhile (then re-raise the cancel): a
    heal abandoned half way would leave the next test a broken peer."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError()
    return task.result()


@dataclass
class Together:
    """Several faults as one: injected in order, healed in reverse, every one healed even
    when another's heal fails (the first error is raised afterwards)."""

    name: str
    parts: Sequence[Fault]
    _injected: list[Fault] = field(default_factory=list)

    def inject(self) -> None:
        for part in self.parts:
            part.inject()
            self._injected.append(part)

    def heal(self) -> None:
        errors: list[Exception] = []
        while self._injected:
            try:
                self._injected.pop().heal()
            except Exception as e:  # heal the others all the same
                errors.append(e)
        if errors:
            raise errors[0]


# -- the control plane and Temporal -----------------------------------------------------------
@dataclass
class ApiServerStopped:
    cluster: LocalCluster
    name: str = "apiserver_stop"

    def inject(self) -> None:
        self.cluster.stop_apiserver()

    def heal(self) -> None:
        self.cluster.start_apiserver()


def _listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


@dataclass
class TemporalStopped:
    server: TemporalDevServer
    name: str = "temporal_stop"

    def inject(self) -> None:
        self.server.stop()
        wait_until(lambda: not _listening(self.server.ip, self.server.port), 30, "Temporal to stop")

    def heal(self) -> None:
        self.server.start()


# -- the registry ------------------------------------------------------------------------------
@dataclass
class RegistryErrors:
    """Every manifest and blob request answers ``status`` (the registry simulator's faults)."""

    registry_url: str
    status: int = 500
    name: str = "registry_500"

    def inject(self) -> None:
        with httpx.Client(trust_env=False, timeout=10) as c:
            # The registry answers with the first fault that matches a request: a scoped
            # delay set earlier (a test's hold of a step) would answer before this one.
            c.delete(f"{self.registry_url}/_sim/faults").raise_for_status()
            fault = {"status": self.status, "target": "any"}
            c.put(f"{self.registry_url}/_sim/faults", json=fault).raise_for_status()

    def heal(self) -> None:
        with httpx.Client(trust_env=False, timeout=10) as c:
            c.delete(f"{self.registry_url}/_sim/faults").raise_for_status()


# -- silent peers ------------------------------------------------------------------------------
@dataclass(eq=False)  # by identity: a set of open links
class _Link:
    """One proxied connection; once muted it stays muted until its client gives up."""

    muted: bool


class SilentProxy:
    """A TCP proxy on 127.0.0.1 in front of ``upstream``, switchable to silent.

    Forwarding, bytes pass both ways untouched (TLS too: the API server's certificate names
    127.0.0.1, which is also where the proxy listens, so clients verify it as they would
    directly). Silent, a new connection is accepted and read and never answered, and every
    open connection stops forwarding both ways and stays that way until its client gives up:
    a peer that holds the socket and says nothing, which only client-side timeouts detect.
    :meth:`resume` forwards new connections again.

    Its own event loop runs in a thread, so a test that blocks its loop (``kubectl`` through
    ``subprocess.run``) never stalls the traffic.
    """

    def __init__(
        self, upstream_host: str, upstream_port: int, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = port  # 0: an ephemeral one
        self._silent = False
        self.lag = 0.0
        self._links: set[_Link] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> SilentProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._serve, self.host, self.port))
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def silence(self) -> None:
        self._call(self._set_silent(True))

    def resume(self) -> None:
        self._call(self._set_silent(False))

    def slow(self, seconds: float) -> None:
        """Every answer (each chunk from upstream) ``seconds`` late, open connections too; 0
        for full speed. A slow API server, to stretch a step that is otherwise too short to
        land a fault in (tests/chaos: promote)."""
        self._call(self._set_lag(seconds))

    def stop(self) -> None:
        if self._thread.is_alive():
            self._call(self._close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> SilentProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _set_lag(self, seconds: float) -> None:
        self.lag = seconds

    async def _set_silent(self, silent: bool) -> None:
        self._silent = silent
        if silent:
            for link in self._links:
                link.muted = True

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(muted=self._silent)
        task = asyncio.current_task()
        assert task is not None
        self._links.add(link)
        self._handlers.add(task)
        try:
            if link.muted:
                await _pump(reader, None, link)
            else:
                await self._forward(reader, writer, link)
        except OSError:
            pass  # a reset: the client sees the connection end, as with the API server itself
        finally:
            self._links.discard(link)
            self._handlers.discard(task)
            writer.close()

    async def _forward(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        pumps = [
            asyncio.create_task(_pump(reader, up_writer, link)),
            asyncio.create_task(_pump(up_reader, writer, link, lambda: self.lag)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            up_writer.close()


async def _pump(
    src: asyncio.StreamReader,
    dst: asyncio.StreamWriter | None,
    link: _Link,
    lag: Callable[[], float] = lambda: 0.0,
) -> None:
    """Copy ``src`` to ``dst`` until EOF, each chunk ``lag()`` seconds late; a muted link
    reads and drops (and sends no EOF: a silent peer does not close either)."""
    while chunk := await src.read(65536):
        if lag() > 0:
            await asyncio.sleep(lag())
        if dst is not None and not link.muted:
            dst.write(chunk)
            await dst.drain()
    if dst is not None and not link.muted and dst.can_write_eof():
        with contextlib.suppress(OSError):
            dst.write_eof()


def kubeconfig_via(kubeconfig: Path, port: int, dest: Path) -> Path:
    """A copy of ``kubeconfig`` whose clusters are reached at 127.0.0.1:``port``."""
    config: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    dest.write_text(yaml.safe_dump(config))
    return dest


@dataclass
class SilentApiServer:
    proxy: SilentProxy
    name: str = "silent_apiserver"

    def inject(self) -> None:
        self.proxy.silence()

    def heal(self) -> None:
        self.proxy.resume()


SLOW_KEYS = ("latency-ms", "load-delay-seconds")


@dataclass
class SilentRuntime:
    """The runtime as silent as its simulator can make it: every decision and every model load
    of a Pod in ``namespace`` takes the fault's whole length (``latency-ms``,
    ``load-delay-seconds``, set on the Namespace, so Pods created meanwhile get them too).

    The Pods ``spared()`` names (the stable's) keep the namespace's earlier values, pinned on
    the Pod (a Pod's own annotation wins): the stable answering is what the matrix checks, so
    the fault must not be what silences it. Not a silent socket: ``/``, ``/api/ps`` and
    ``/api/version`` still answer at once, and requests that came in during the fault answer
    late, after it (the simulator reads a Pod's faults when a request arrives).
    """

    cluster: LocalCluster
    namespace: str
    seconds: float
    spared: Callable[[], list[str]]
    name: str = "silent_runtime"
    _before: dict[str, str | None] = field(default_factory=dict)
    _pinned: list[str] = field(default_factory=list)

    def inject(self) -> None:
        ns = self.cluster.kubectl_json("get", "namespace", self.namespace)
        annotations = ns["metadata"].get("annotations") or {}
        self._before = {key: annotations.get(SIM_PREFIX + key) for key in SLOW_KEYS}
        self._pinned = self.spared()
        pins = [f"{SIM_PREFIX}{k}={v if v is not None else 0}" for k, v in self._before.items()]
        for pod in self._pinned:
            self._annotate("pod", pod, pins)
        slow = {
            "latency-ms": str(int(self.seconds * 1000)),
            "load-delay-seconds": str(self.seconds),
        }
        self._annotate(
            "namespace", self.namespace, [f"{SIM_PREFIX}{k}={v}" for k, v in slow.items()]
        )

    def heal(self) -> None:
        restore = [
            f"{SIM_PREFIX}{k}={v}" if v is not None else f"{SIM_PREFIX}{k}-"
            for k, v in self._before.items()
        ]
        self._annotate("namespace", self.namespace, restore)
        for pod in self._pinned:
            self._annotate("pod", pod, [f"{SIM_PREFIX}{k}-" for k in SLOW_KEYS], check=False)
        self._pinned = []

    def _annotate(self, kind: str, name: str, values: list[str], check: bool = True) -> None:
        namespace = [] if kind == "namespace" else ["-n", self.namespace]
        self.cluster.kubectl(
            *namespace, "annotate", kind, name, "--overwrite", *values, check=check
        )


# -- processes ---------------------------------------------------------------------------------
class Restartable(Protocol):
    def kill(self) -> None: ...

    def start(self) -> None: ...


@dataclass
class ProcessKilled:
    """SIGKILL (a crash: nothing runs in the process), down for the window, then started."""

    process: Restartable
    name: str

    def inject(self) -> None:
        self.process.kill()

    def heal(self) -> None:
        self.process.start()


class Holdable(Protocol):
    """A supervised process: ``hold_down`` keeps its supervisor from starting it again."""

    def hold_down(self) -> None: ...

    def exit_code(self, timeout: float) -> int | None: ...

    def kill(self) -> None: ...

    def start(self) -> None: ...


# Python asks for pages all the time (a decision's response, a heartbeat); a worker squeezed
# to its usage has been killed within a second or two here.
OOM_SECONDS = 60.0


class FaultNotLanded(AssertionError):
    """The fault could not be put in place; the cell fails on it, it does not pass unhurt."""


@dataclass
class OomKilled:
    """The kernel's OOM killer, not a signal from the test: the worker's memory limit drops to
    what it uses, its next allocation exceeds it, the kernel kills it (the cgroup's ``oom_kill``
    count proves it was the OOM killer). Down for the window like a container in
    CrashLoopBackOff after ``OOMKilled``, then started with the limit lifted."""

    process: Holdable
    cgroup: WorkerCgroup
    name: str = "worker_oom"

    def inject(self) -> None:
        before = self.cgroup.oom_kills()
        self.process.hold_down()
        self.cgroup.squeeze()
        code = self.process.exit_code(OOM_SECONDS)
        self.cgroup.unlimit()
        if code is None or self.cgroup.oom_kills() == before:
            raise FaultNotLanded(
                f"no OOM kill within {OOM_SECONDS:.0f}s (exit code {code}, "
                f"oom_kill {self.cgroup.oom_kills()} before {before})"
            )

    def heal(self) -> None:
        self.cgroup.unlimit()
        self.process.kill()  # a no-op once the kernel killed it; else no second worker
        self.process.start()


@dataclass
class RuntimeUnreachable:
    """The runtime's Pods unreachable from the worker alone: its packets to the Pod network are
    dropped, while the API server, Temporal and the registry answer it, and the controller and
    the test still reach every Pod (the stable keeps serving them)."""

    cgroup: WorkerCgroup
    pod_cidrs: list[str]
    name: str = "runtime_unreachable"

    def inject(self) -> None:
        self.cgroup.block(self.pod_cidrs)

    def heal(self) -> None:
        self.cgroup.unblock()
