"""Benchmark: local environment start-up to "Deployment Pods Running and Ready", and one rollout.

Prints numbers, asserts nothing. Run inside the test namespace:
    hack/in-netns.sh .venv/bin/python bench/startup.py
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from localenv.env import LocalEnv


def main() -> None:
    t0 = time.monotonic()
    env = LocalEnv(Path(tempfile.mkdtemp(prefix="dmrollout-bench-")))
    try:
        env.start_cluster()
        t_cluster = time.monotonic() - t0
        env.cluster.apply(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "bench", "namespace": "default"},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": "bench"}},
                    "template": {
                        "metadata": {"labels": {"app": "bench"}},
                        "spec": {"containers": [{"name": "c", "image": "example/none:1"}]},
                    },
                },
            }
        )
        while True:
            d = json.loads(env.cluster.kubectl("get", "deployment", "bench", "-o", "json").stdout)
            if d.get("status", {}).get("readyReplicas") == 3:
                break
            time.sleep(0.05)
        t_ready = time.monotonic() - t0
        env.start_temporal()
        t_temporal = time.monotonic() - t0
        env.start_simulators()
        t_sims = time.monotonic() - t0
        print(f"cluster up (API ready, nodes Ready, default SA):   {t_cluster:6.2f} s")
        print(f"3 Deployment Pods Running and Ready:               {t_ready:6.2f} s")
        print(f"+ Temporal dev server:                             {t_temporal:6.2f} s")
        print(f"+ simulators:                                      {t_sims:6.2f} s")
    finally:
        env.stop()


if __name__ == "__main__":
    main()
