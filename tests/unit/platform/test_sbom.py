"""The image's SBOM (hack/sbom.py, issue 38 item 5) from a file system laid out as the image's:
dpkg's installed packages and the virtualenv's distributions, as schema-valid CycloneDX 1.6."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]

STATUS = """Package: python3.11
Status: install ok installed
Architecture: amd64
Version: 3.11.2-6+deb12u6
Description: Interactive high-level object-oriented language
 continued description line: with a colon

Package: removed-thing
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: ca-certificates
Status: install ok installed
Architecture: all
Version: 20230311
"""


def sbom_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sbom", ROOT / "hack" / "sbom.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rootfs(tmp_path: Path) -> Path:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(STATUS)
    site = tmp_path / "opt/venv/lib/python3.11/site-packages"
    for name, version in (("temporalio", "1.20.0"), ("pydantic_core", "2.41.5")):
        meta = site / f"{name}-{version}.dist-info"
        meta.mkdir(parents=True)
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return tmp_path


def test_every_installed_package_and_distribution_is_a_component(tmp_path: Path) -> None:
    bom = json.loads(sbom_module().sbom(rootfs(tmp_path), "dmrollout", "0.1.0"))
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.6"
    assert bom["metadata"]["component"]["name"] == "dmrollout"
    purls = sorted(c["purl"] for c in bom["components"])
    assert purls == [
        "pkg:deb/debian/ca-certificates@20230311?arch=all",
        "pkg:deb/debian/python3.11@3.11.2-6%2Bdeb12u6?arch=amd64",
        "pkg:pypi/pydantic-core@2.41.5",
        "pkg:pypi/temporalio@1.20.0",
    ]  # the deinstalled package is not one
