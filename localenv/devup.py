"""``dmrollout dev up`` / ``dmrollout demo``: the local environment in the foreground."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from pathlib import Path

from localenv.cluster import in_private_netns
from localenv.env import LocalEnv


def run_dev_up(state_dir: str | None) -> int:
    if not in_private_netns():
        print(
            "dmrollout: the local environment runs inside a private network namespace; "
            "start it with `make dev-up` / `make demo` (hack/in-netns.sh)",
            file=sys.stderr,
        )
        return 2
    root = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="dmrollout-"))
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    env = LocalEnv(root)
    try:
        env.start()
        kubeconfig = env.cluster.kubeconfig
        print(
            "local environment up ("
            + ", ".join(f"{part} {secs:.1f}s" for part, secs in env.timings.items())
            + ")\n"
            f"  state and logs:  {root}\n"
            f"  kubeconfig:      {kubeconfig}\n"
            f"  Temporal:        {env.temporal.address} (namespace default)\n"
            f"  Temporal UI:     {env.temporal.ui_url}\n"
            f"  registry sim:    {env.simulators.registry_url}\n"
            f"  inside the namespace: nsenter --net=/proc/{_self_pid()}/ns/net "
            f"kubectl --kubeconfig {kubeconfig} get dm -A\n"
            "Ctrl-C stops everything.",
            flush=True,
        )
        stop.wait()
    finally:
        env.stop()
    return 0


def _self_pid() -> int:
    import os

    return os.getpid()
