"""`dmrollout <verb>` run from the built image with buildah (chroot isolation), as the
Deployments run it: the image's entrypoint, user 65532, only DMROLLOUT_* settings passed in.

`buildah run --isolation chroot` shares the caller's network namespace, so inside
hack/in-netns.sh the process reaches the local cluster, Temporal and the simulators on loopback.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def image_ref() -> str:
    """What `make image` tags (hack/image.sh), unless DMROLLOUT_IMAGE names another."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return os.environ.get("DMROLLOUT_IMAGE", f"localhost/dmrollout:{version}")


NONROOT = 65532
_FILE_FIELDS = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


def mountable_kubeconfig(kubeconfig: Path, into: Path) -> Path:
    """The local cluster's kubeconfig with its certificate and key files inlined, in a directory
    of its own, owned by the image's user (the files it names are root's, mode 0600): what a
    Pod gets from a Secret volume with fsGroup. The client writes the inlined files under /tmp."""
    config: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    for entry in [*config["clusters"], *config["users"]]:
        section = entry.get("cluster") or entry.get("user")
        for field, data_field in _FILE_FIELDS.items():
            if field in section:
                raw = (kubeconfig.parent / section.pop(field)).read_bytes()
                section[data_field] = base64.b64encode(raw).decode()
    into.mkdir(mode=0o755)
    out = into / "kubeconfig"
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)
    os.chown(out, NONROOT, NONROOT)
    return out


def image_size_bytes(ref: str) -> int:
    out = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Size}}", ref],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return int(out.stdout.strip())


class ImageProcess:
    """One working container from the image and one `dmrollout` process in it."""

    def __init__(
        self, ref: str, args: list[str], env: dict[str, str], mounts: list[Path], log: Path
    ) -> None:
        self.ref = ref
        self.args = args
        # Only the project's settings: the host's PATH, HOME or proxies must not leak in.
        self.env = {k: v for k, v in env.items() if k.startswith("DMROLLOUT_")}
        self.mounts = mounts
        self.log = log
        self.container = f"dmrollout-test-{uuid.uuid4().hex[:8]}"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        cmd = ["buildah", "run", "--isolation", "chroot", "--user", f"{NONROOT}:{NONROOT}"]
        for key, value in sorted(self.env.items()):
            cmd += ["--env", f"{key}={value}"]
        for path in self.mounts:
            cmd += ["-v", f"{path}:{path}:ro"]
        # The image's ENTRYPOINT is `dmrollout`; buildah run takes the full command.
        return [*cmd, self.container, "dmrollout", *self.args]

    def start(self) -> None:
        subprocess.run(
            ["buildah", "from", "--name", self.container, self.ref],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        self.proc = subprocess.Popen(
            self.command(),
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        subprocess.run(["buildah", "rm", self.container], capture_output=True, timeout=120)
