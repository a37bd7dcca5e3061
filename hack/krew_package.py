"""Per-platform krew archives of a single-file ``kubectl-dm``, and the plugin manifest (issue 38).

``kubectl-dm`` is a zipapp (shiv) of dmrollout's CLI with its runtime dependencies for one
platform. The wheels of every supported CPython are merged into one site-packages: an
extension module carries its ABI tag in its file name (``_pydantic_core.cpython-312-...so``),
so the builds for 3.11 to 3.14 sit side by side and the interpreter that runs the zipapp imports
its own. Versions are the ones the tests ran with (the venv's ``pip freeze`` as constraints);
a platform that has no wheel of a pinned version (cryptography stopped building for Intel
Macs) is resolved within pyproject's ranges instead, and the script says so. On its first run
shiv unpacks the zipapp to ``~/.cache/kubectl-dm`` (``SHIV_ROOT`` moves it). Windows is not
built: kubectl finds plugins there as ``.exe`` files, which a zipapp is not.

    python hack/krew_package.py [--platforms linux_amd64,darwin_arm64] [--out build/krew]
        [--base-url URL]

Writes ``kubectl-dm_<version>_<os>_<arch>.tar.gz`` per platform with its SBOM
(``….sbom.cdx.json``, hack/sbom.py) and ``dm.yaml`` (the krew manifest, each archive's sha256 in
it) to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from sbom import distribution_sbom

REPO = Path(__file__).resolve().parents[1]
PYTHONS = ("3.11", "3.12", "3.13", "3.14")
# Reproducible archives: every member dated 2020-01-01 (SOURCE_DATE_EPOCH for shiv too).
EPOCH = 1577836800
DEFAULT_BASE_URL = "https://github.com/dmrollout/dmrollout/releases/download/v{version}"


@dataclass(frozen=True)
class Platform:
    os: str
    arch: str
    # pip --platform tags, most compatible first (pip accepts a wheel matching any).
    tags: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.os}_{self.arch}"


PLATFORMS = {
    p.name: p
    for p in (
        Platform("linux", "amd64", ("manylinux2014_x86_64", "manylinux_2_28_x86_64")),
        Platform("linux", "arm64", ("manylinux2014_aarch64", "manylinux_2_28_aarch64")),
        Platform("darwin", "arm64", ("macosx_11_0_arm64", "macosx_14_0_arm64")),
        Platform("darwin", "amd64", ("macosx_10_12_x86_64", "macosx_11_0_x86_64")),
    )
}

# The zipapp's entry: a clear word on an interpreter it holds no build for, then the CLI.
ENTRY = '''"""kubectl-dm's entry in the krew zipapp (hack/krew_package.py)."""
import sys

SUPPORTED = {supported!r}


def main() -> None:
    if "%d.%d" % sys.version_info[:2] not in SUPPORTED:
        sys.exit(
            "kubectl-dm needs CPython %s as python3 on PATH (found %d.%d at %s); or install it "
            "with pip: pip install dmrollout" % (", ".join(SUPPORTED), *sys.version_info[:2],
                                                  sys.executable)
        )
    from controller.cli.main import kubectl_main

    kubectl_main()
'''


def version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def semver(pep440: str) -> str:
    """krew's spec.version is a semantic version: 0.1.0.dev0 -> v0.1.0-dev.0."""
    m = re.fullmatch(r"(\d+\.\d+\.\d+)(?:\.?(dev|rc|a|b)(\d+))?", pep440)
    if m is None:
        raise SystemExit(f"pyproject version {pep440!r} is not N.N.N[.devN|rcN|aN|bN]")
    release, word, n = m.groups()
    return f"v{release}-{word}.{n}" if word else f"v{release}"


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)


def pins(work: Path) -> Path:
    """The versions the tests ran with, without this project and editable installs."""
    frozen = pip("freeze", "--exclude-editable").stdout.splitlines()
    path = work / "constraints.txt"
    path.write_text("\n".join(line for line in frozen if "==" in line) + "\n")
    return path


def download(project: Path, plat: Platform, python: str, dest: Path, pinned: Path) -> str:
    """The wheels of ``project`` and its dependencies for one platform and CPython; how they
    were resolved."""
    args = ["download", "--only-binary=:all:", "--implementation", "cp", "-d", str(dest)]
    args += ["--python-version", python, *(f"--platform={t}" for t in plat.tags)]
    done = pip(*args, "-c", str(pinned), str(project))
    if done.returncode == 0:
        return "pinned"
    unpinned = pip(*args, str(project))
    if unpinned.returncode != 0:
        raise SystemExit(f"{plat.name} cp{python}: pip download failed:\n{unpinned.stderr}")
    return "within pyproject's ranges (a pinned version has no wheel here)"


def unpack(wheels: list[Path], site: Path) -> None:
    """Install wheels by unpacking them (what pip does for a target, minus scripts): the
    ``.data/purelib`` and ``.data/platlib`` parts go to the top, others are not needed."""
    for wheel in sorted(set(wheels), key=lambda w: w.name):
        with zipfile.ZipFile(wheel) as z:
            for member in z.infolist():
                parts = Path(member.filename).parts
                if parts[0].endswith(".data"):
                    if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                        continue
                    parts = parts[2:]
                target = site.joinpath(*parts)
                if member.is_dir():
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(member))


# What the CLI never loads, removed as the image removes it (Dockerfile): the kubernetes
# client's asyncio twin and aiohttp, which only it imports (dmrollout uses the sync client).
PRUNED = (
    "kubernetes/aio",
    "aiohttp",
    "aiohttp-*.dist-info",
    "aiohttp_retry",
    "aiohttp_retry-*.dist-info",
)


def prune(site: Path) -> None:
    for pattern in PRUNED:
        for path in site.glob(pattern):
            shutil.rmtree(path)


def zipapp(site: Path, out: Path) -> None:
    entry = site / "kubectl_dm_entry.py"
    entry.write_text(ENTRY.format(supported=PYTHONS))
    cmd = [
        str(Path(sys.executable).with_name("shiv")),
        "--site-packages", str(site),
        "-e", "kubectl_dm_entry:main",
        "-o", str(out),
        "-p", "/usr/bin/env python3",
        "--root", "~/.cache/kubectl-dm",
        "--reproducible",
        "--compressed",
    ]  # fmt: skip
    env = {"SOURCE_DATE_EPOCH": str(EPOCH), "PATH": "/usr/bin:/bin"}
    subprocess.run(cmd, check=True, timeout=600, env=env, capture_output=True)


def archive(exe: Path, dest: Path) -> str:
    """A tar.gz of kubectl-dm and the licence, dated EPOCH; its sha256."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as tar:
        for path, name in ((exe, "kubectl-dm"), (REPO / "LICENSE", "LICENSE")):
            if not path.exists():
                continue
            info = tar.gettarinfo(str(path), arcname=name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "", ""
            info.mode = 0o755 if name == "kubectl-dm" else 0o644
            with path.open("rb") as f:
                tar.addfile(info, f)
    dest.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def manifest(ver: str, base_url: str, built: dict[Platform, tuple[str, str]]) -> dict[str, object]:
    return {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "dm"},
        "spec": {
            "version": semver(ver),
            "homepage": base_url.split("/releases/")[0],
            "shortDescription": "Roll out and inspect dmrollout DecisionModels",
            "description": (
                "kubectl dm is dmrollout's CLI as a kubectl plugin: status, wait, promote,\n"
                "reject, abort, retry, undo and history of DecisionModel rollouts, with the\n"
                "audit trail from Temporal.\n"
            ),
            "caveats": (
                f"kubectl dm runs on CPython {', '.join(PYTHONS)} found as python3 on PATH,\n"
                "and unpacks itself to ~/.cache/kubectl-dm on its first run (SHIV_ROOT moves\n"
                "it). Temporal is found as by the temporal CLI (--address, TEMPORAL_ADDRESS,\n"
                "temporal.toml profiles); Kubernetes as by kubectl (docs/operations.md).\n"
            ),
            "platforms": [
                {
                    "selector": {"matchLabels": {"os": p.os, "arch": p.arch}},
                    "uri": f"{base_url}/{name}",
                    "sha256": digest,
                    "files": [{"from": "kubectl-dm", "to": "."}, {"from": "LICENSE", "to": "."}],
                    "bin": "kubectl-dm",
                }
                for p, (name, digest) in built.items()
            ],
        },
    }


def build(plat: Platform, project: Path, pinned: Path, work: Path, out: Path, ver: str) -> str:
    wheels: list[Path] = []
    for python in PYTHONS:
        dest = work / plat.name / python
        how = download(project, plat, python, dest, pinned)
        print(f"{plat.name} cp{python}: {how}", file=sys.stderr)
        wheels += sorted(dest.glob("*.whl"))
    site = work / plat.name / "site-packages"
    unpack(wheels, site)
    prune(site)
    exe = work / plat.name / "kubectl-dm"
    zipapp(site, exe)
    name = f"kubectl-dm_{ver}_{plat.name}.tar.gz"
    digest = archive(exe, out / name)
    # The Python distribution's SBOM: what this archive's zipapp holds.
    sbom = out / f"kubectl-dm_{ver}_{plat.name}.sbom.cdx.json"
    sbom.write_text(distribution_sbom(site, "dmrollout", ver))
    print(f"{out / name}: {exe.stat().st_size // 1_000_000} MB zipapp, sha256 {digest}")
    return digest


class _Literal(yaml.SafeDumper):
    """Multi-line strings as literal blocks, as krew-index manifests write them."""


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Literal.add_representer(str, _text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    parser.add_argument("--out", type=Path, default=REPO / "build" / "krew")
    parser.add_argument("--base-url", default=None)
    args = parser.parse_args()
    unknown = set(args.platforms.split(",")) - set(PLATFORMS)
    if unknown:
        parser.error(f"--platforms: unknown {sorted(unknown)}; known: {sorted(PLATFORMS)}")
    ver = version()
    base_url = (args.base_url or DEFAULT_BASE_URL.format(version=ver)).rstrip("/")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="krew-") as tmp:
        work = Path(tmp)
        done = pip("wheel", "--no-deps", "-q", "-w", str(work / "project"), str(REPO))
        if done.returncode != 0:
            raise SystemExit(f"building the project's wheel failed:\n{done.stderr}")
        [project] = (work / "project").glob("dmrollout-*.whl")
        pinned = pins(work)
        built: dict[Platform, tuple[str, str]] = {}
        for name in args.platforms.split(","):
            plat = PLATFORMS[name]
            built[plat] = (
                f"kubectl-dm_{ver}_{plat.name}.tar.gz",
                build(plat, project, pinned, work, args.out, ver),
            )
            shutil.rmtree(work / plat.name)
    text = yaml.dump(manifest(ver, base_url, built), Dumper=_Literal, sort_keys=False, width=100)
    (args.out / "dm.yaml").write_text(text)
    print(args.out / "dm.yaml")


if __name__ == "__main__":
    main()
