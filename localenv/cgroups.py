"""A process group of its own for one chaos cell's worker: a memory limit the kernel enforces,
and a network path the namespace's firewall can tell apart from every other process.

Two hierarchies, as this machine mounts them (hybrid: controllers on v1, an empty v2 beside):

- ``/sys/fs/cgroup/memory/<name>``: cgroup v1 memory. Lowering ``memory.limit_in_bytes`` to
  what the worker already uses makes its next allocation the kernel OOM killer's business, as
  a container's limit does (``memory.oom_control`` counts the kills);
- ``/sys/fs/cgroup/unified/<name>``: cgroup v2, only as a label for ``iptables -m cgroup
  --path <name>``. The label is taken when a socket is made, so the process joins both groups
  before it starts (:meth:`WorkerCgroup.join_argv`), never after.

The firewall rules live in the run's private network namespace (``hack/in-netns.sh``) and go
with it; the groups are removed by :meth:`WorkerCgroup.remove`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

MEMORY_ROOT = Path("/sys/fs/cgroup/memory")
UNIFIED_ROOT = Path("/sys/fs/cgroup/unified")
PAGE = 4096
UNLIMITED = "-1"
# Shell that moves itself into the groups given as arguments, then becomes the command.
JOIN = 'for g in "$@"; do [ "$g" = -- ] && break; echo $$ > "$g/cgroup.procs"; shift; done; '
JOIN += 'shift; exec "$@"'


def available() -> bool:
    """Both hierarchies are mounted and writable (root in the run's namespace)."""
    return all((root / "cgroup.procs").exists() for root in (MEMORY_ROOT, UNIFIED_ROOT))


@dataclass
class WorkerCgroup:
    name: str
    _rules: list[list[str]] = field(default_factory=list)

    @property
    def memory(self) -> Path:
        return MEMORY_ROOT / self.name

    @property
    def unified(self) -> Path:
        return UNIFIED_ROOT / self.name

    def create(self) -> WorkerCgroup:
        if not available():
            raise RuntimeError(
                f"cgroups not mounted writable at {MEMORY_ROOT} and {UNIFIED_ROOT}: the worker_oom "
                "and runtime_unreachable chaos cells need both (run as root in hack/in-netns.sh)"
            )
        for group in (self.memory, self.unified):
            group.mkdir(exist_ok=True)
        return self

    def join_argv(self, argv: list[str]) -> list[str]:
        """``argv`` run inside both groups from its first instruction."""
        return ["/bin/sh", "-c", JOIN, "join", str(self.memory), str(self.unified), "--", *argv]

    # -- memory ---------------------------------------------------------------------------------
    def usage(self) -> int:
        return int((self.memory / "memory.usage_in_bytes").read_text())

    def oom_kills(self) -> int:
        for line in (self.memory / "memory.oom_control").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def squeeze(self) -> int:
        """The limit set to today's usage, once the group's page cache (its log files) is
        reclaimed: the next page the process asks for exceeds it and nothing is left to
        reclaim for it. Returns the limit."""
        (self.memory / "memory.force_empty").write_text("0")
        limit = -(-self.usage() // PAGE) * PAGE
        (self.memory / "memory.limit_in_bytes").write_text(str(limit))
        return limit

    def unlimit(self) -> None:
        (self.memory / "memory.limit_in_bytes").write_text(UNLIMITED)

    # -- network --------------------------------------------------------------------------------
    def block(self, cidrs: list[str]) -> None:
        """Packets of the group's sockets to ``cidrs`` are dropped (no answer, no reset: a
        black hole, the hardest case for a client's timeouts)."""
        for cidr in cidrs:
            rule = ["OUTPUT", "-m", "cgroup", "--path", self.name, "-d", cidr, "-j", "DROP"]
            _iptables("-I", *rule)
            self._rules.append(rule)

    def unblock(self) -> None:
        while self._rules:
            _iptables("-D", *self._rules.pop())

    def remove(self) -> None:
        """The rules, then the groups (once their processes are gone)."""
        self.unblock()
        for group in (self.memory, self.unified):
            if group.exists():
                group.rmdir()


def _iptables(*args: str) -> None:
    subprocess.run(["iptables", "-w", "5", *args], check=True, capture_output=True, timeout=30)
