"""The SLSA v1 provenance predicate of a ``make release`` (issue 38 item 5).

cosign wraps it in an in-toto Statement whose subject is one artifact (name and sha256) and
signs that as a DSSE envelope (``cosign attest-blob --type slsaprovenance1``, hack/sign.sh).
The predicate says what was built from what: the source commit (and whether the tree had
uncommitted changes), the files that define the build (Dockerfile, pyproject, the chart, the
Python versions the tests pinned), and the tools' versions. Nothing secret is read.

    python hack/provenance.py OUT --started ISO8601
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BUILD_TYPE = "https://github.com/dmrollout/dmrollout/blob/main/docs/operations.md#signed-releases"
BUILDER = "https://github.com/dmrollout/dmrollout/blob/main/Makefile#release"
# The files whose content decides what the artifacts hold.
DEFINITION = ("Dockerfile", "pyproject.toml", "Makefile", "hack/image.sh", "hack/krew_package.py")


def _run(*cmd: str) -> str:
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source() -> dict[str, Any]:
    commit = _run("git", "rev-parse", "HEAD")
    origin = _run("git", "remote", "get-url", "origin")
    return {
        "uri": f"git+{origin}" if origin else "git+local",
        "digest": {"gitCommit": commit},
        # Uncommitted changes: the commit alone does not say what was built.
        "dirty": bool(_run("git", "status", "--porcelain", "--untracked-files=no")),
    }


def dependencies() -> list[dict[str, Any]]:
    found = []
    for name in DEFINITION:
        path = REPO / name
        if path.is_file():
            found.append({"uri": f"file:{name}", "digest": {"sha256": _sha256(path.read_bytes())}})
    chart = REPO / "charts" / "dmrollout"
    charted = b"".join(
        str(p.relative_to(chart)).encode() + b"\0" + p.read_bytes()
        for p in sorted(chart.rglob("*"))
        if p.is_file()
    )
    found.append({"uri": "file:charts/dmrollout", "digest": {"sha256": _sha256(charted)}})
    frozen = _run(sys.executable, "-m", "pip", "freeze", "--exclude-editable")
    found.append(
        {"uri": "pip-freeze:build-environment", "digest": {"sha256": _sha256(frozen.encode())}}
    )
    return found


def predicate(started: str, finished: str) -> dict[str, Any]:
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {"target": "release", "source": source()},
            "internalParameters": {
                "python": platform.python_version(),
                "go": _run("go", "env", "GOVERSION"),
                "machine": platform.machine(),
            },
            "resolvedDependencies": dependencies(),
        },
        "runDetails": {
            "builder": {"id": BUILDER},
            "metadata": {
                "invocationId": str(uuid.uuid4()),
                "startedOn": started,
                "finishedOn": finished,
            },
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--started", required=True, help="when the release began (RFC 3339)")
    args = parser.parse_args()
    finished = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    args.out.write_text(json.dumps(predicate(args.started, finished), indent=2) + "\n")
    print(args.out)


if __name__ == "__main__":
    main()
