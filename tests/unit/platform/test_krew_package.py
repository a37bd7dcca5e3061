"""kubectl-dm's krew packaging (hack/krew_package.py, issue 38 item 4): the manifest krew reads,
the version it compares, and the merge of one package's builds for several CPythons."""

from __future__ import annotations

import importlib.util
import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def krew_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("krew_package", ROOT / "hack" / "krew_package.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["krew_package"] = module  # dataclasses look their module up
    if str(ROOT / "hack") not in sys.path:
        sys.path.insert(0, str(ROOT / "hack"))  # as when run as a script: its sbom module
    spec.loader.exec_module(module)
    return module


def test_the_version_is_a_semantic_version_krew_accepts() -> None:
    k = krew_module()
    assert k.semver("0.1.0.dev0") == "v0.1.0-dev.0"
    assert k.semver("1.2.3") == "v1.2.3"
    assert k.semver("1.2.3rc2") == "v1.2.3-rc.2"
    with pytest.raises(SystemExit, match="pyproject version"):
        k.semver("1.2")


def test_the_manifest_names_each_platform_with_its_archive_and_digest() -> None:
    k = krew_module()
    linux, mac = k.PLATFORMS["linux_amd64"], k.PLATFORMS["darwin_arm64"]
    built = {linux: ("a.tar.gz", "1" * 64), mac: ("b.tar.gz", "2" * 64)}
    m = k.manifest("0.1.0.dev0", "https://example.org/dl/v0.1.0.dev0", built)
    assert m["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert m["kind"] == "Plugin" and m["metadata"] == {"name": "dm"}
    spec = m["spec"]
    assert spec["version"] == "v0.1.0-dev.0"
    selectors = [p["selector"]["matchLabels"] for p in spec["platforms"]]
    assert selectors == [{"os": "linux", "arch": "amd64"}, {"os": "darwin", "arch": "arm64"}]
    assert [p["uri"] for p in spec["platforms"]] == [
        "https://example.org/dl/v0.1.0.dev0/a.tar.gz",
        "https://example.org/dl/v0.1.0.dev0/b.tar.gz",
    ]
    assert all(p["bin"] == "kubectl-dm" for p in spec["platforms"])


def _wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_builds_for_several_interpreters_sit_side_by_side(tmp_path: Path) -> None:
    k = krew_module()
    w311 = _wheel(
        tmp_path / "core-1-cp311-cp311-x.whl",
        {
            "core/__init__.py": "from ._core import *\n",
            "core/_core.cpython-311-x86_64-linux-gnu.so": "311",
            "core-1.dist-info/METADATA": "Name: core\n",
        },
    )
    w312 = _wheel(
        tmp_path / "core-1-cp312-cp312-x.whl",
        {
            "core/__init__.py": "from ._core import *\n",
            "core/_core.cpython-312-x86_64-linux-gnu.so": "312",
            "core-1.dist-info/METADATA": "Name: core\n",
            "core-1.data/purelib/extra.py": "x = 1\n",
            "core-1.data/scripts/tool": "#!/bin/sh\n",
        },
    )
    site = tmp_path / "site"
    k.unpack([w311, w312, w311], site)
    found = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert found == [
        "core-1.dist-info/METADATA",
        "core/__init__.py",
        "core/_core.cpython-311-x86_64-linux-gnu.so",
        "core/_core.cpython-312-x86_64-linux-gnu.so",
        "extra.py",
    ]


def test_what_the_cli_never_loads_is_left_out_as_in_the_image(tmp_path: Path) -> None:
    k = krew_module()
    for d in ("kubernetes/aio", "kubernetes/client", "aiohttp", "aiohttp-3.14.dist-info", "yarl"):
        (tmp_path / d).mkdir(parents=True)
    k.prune(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == ["kubernetes", "kubernetes/client", "yarl"]


def test_the_distributions_sbom_lists_what_the_zipapp_holds(tmp_path: Path) -> None:
    k = krew_module()
    for name, version in (
        ("dmrollout", "0.1.0.dev0"),
        ("pydantic_core", "2.50.5"),
        ("PyYAML", "6.0.4"),
    ):
        meta = tmp_path / f"{name}-{version}.dist-info" / "METADATA"
        meta.parent.mkdir()
        meta.write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    bom = json.loads(k.distribution_sbom(tmp_path, "dmrollout", "0.1.0.dev0"))
    assert bom["metadata"]["component"]["name"] == "dmrollout"
    assert bom["metadata"]["component"]["type"] == "application"
    assert sorted(c["purl"] for c in bom["components"]) == [
        "pkg:pypi/pydantic-core@2.50.5",
        "pkg:pypi/pyyaml@6.0.4",
    ]
