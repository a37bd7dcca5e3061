"""``dmrollout dev up`` / ``dmrollout demo``: the local environment in the foreground."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from localenv.cluster import in_private_netns
from localenv.env import LocalEnv
from localenv.processes import ManagedProcess

UI_SOCKET_ENV = "DMROLLOUT_UI_SOCKET"


def run_dev_up(state_dir: str | None, demo: bool = False, once: bool = False) -> int:
    if not in_private_netns():
        print(
            "dmrollout: the local environment runs inside a private network namespace; "
            "start it with `make dev-up` / `make demo` (hack/in-netns.sh)",
            file=sys.stderr,
        )
        return 2
    began = time.monotonic()
    root = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="dmrollout-"))
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    env = LocalEnv(root)
    code = 0
    try:
        env.start()
        socket_path = os.environ.get(UI_SOCKET_ENV)
        if socket_path:
            # The host side of the bridge (started by `make demo` outside the namespace)
            # reaches the UI through this relay.
            env.extra_processes.append(
                ManagedProcess(
                    "ui-bridge",
                    [sys.executable, "-m", "localenv.bridge", "inside", "--unix", socket_path,
                     "--connect", f"127.0.0.1:{env.temporal.ui_port}"],
                    root / "logs",
                ).start()
            )  # fmt: skip
        kubeconfig = env.cluster.kubeconfig
        timings = ", ".join(f"{part} {secs:.1f}s" for part, secs in env.timings.items())
        print(f"local environment up ({timings})", flush=True)
        if demo:
            from localenv.demo import run_demo, ui_link

            took = run_demo(env, stop, root)
            print(f"==> both rollouts done in {took:.0f}s ({time.monotonic() - began:.0f}s in all)")
            ui = ui_link()
        else:
            ui = env.temporal.ui_url
        reach = (
            "from the host browser (bridged)"
            if socket_path
            else f"inside the namespace (host: nsenter --net=/proc/{os.getpid()}/ns/net)"
        )
        print(
            f"\n  Temporal UI:   {ui}   [{reach}]\n"
            f"  kubeconfig:    {kubeconfig}\n"
            f"  watch:         nsenter --net=/proc/{os.getpid()}/ns/net "
            f"kubectl --kubeconfig {kubeconfig} get dm -A -w\n"
            f"  Temporal CLI:  nsenter --net=/proc/{os.getpid()}/ns/net "
            f"temporal workflow list --query \"DmName='support-router'\"\n"
            f"  state, logs:   {root}\n" + ("" if once else "Ctrl-C stops everything.\n"),
            flush=True,
        )
        if not once:
            stop.wait()
    except KeyboardInterrupt:
        pass
    except Exception as e:
        print(f"dmrollout: {e}", file=sys.stderr)
        code = 1
    finally:
        env.stop()
    return code
