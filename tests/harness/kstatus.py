"""kstatus as Flux, Helm 4's ``--wait`` and kpt compute it: the Go checker of hack/kstatus
(sigs.k8s.io/cli-utils' kstatus, built once by hack/kstatus.sh) as a coprocess, one JSON line
per object each way."""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class KStatus:
    status: str  # InProgress, Failed, Current, Terminating, NotFound, Unknown
    message: str


class KStatusChecker:
    """One checker process; ``check`` may be called from several threads."""

    def __init__(self) -> None:
        built = subprocess.run(
            ["bash", str(ROOT / "hack" / "kstatus.sh")],
            capture_output=True, text=True, check=True, timeout=600,
        )  # fmt: skip
        self._proc = subprocess.Popen(
            [built.stdout.strip()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        )  # fmt: skip
        self._lock = threading.Lock()

    def check(self, obj: dict[str, Any]) -> KStatus:
        with self._lock:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(json.dumps(obj) + "\n")
            self._proc.stdin.flush()
            answer = json.loads(self._proc.stdout.readline())
        if answer.get("error"):
            raise ValueError(f"kstatus: {answer['error']}")
        return KStatus(answer["status"], answer.get("message", ""))

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=10)
