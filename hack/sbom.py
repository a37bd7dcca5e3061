"""Software bills of materials (issue 38 item 5), as CycloneDX 1.6 JSON, built with the
CycloneDX project's own library and checked against its schema before they are written:

- the image's: every Debian package dpkg installed and every Python distribution in the image's
  virtualenv (``hack/sbom.py ROOTFS OUT.cdx.json --version 0.1.0``; ROOTFS is the image's file
  system, ``buildah mount``, read, never executed);
- the Python distribution's: every distribution a kubectl-dm zipapp holds, from its
  site-packages (hack/krew_package.py writes one beside each krew archive).
"""

from __future__ import annotations

import argparse
import email.parser
from pathlib import Path

from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

VENV_GLOB = "opt/venv/lib/python3*/site-packages/*.dist-info/METADATA"


def debian_packages(rootfs: Path) -> list[Component]:
    """Each package dpkg's status file has installed (``install ok installed``)."""
    status = rootfs / "var" / "lib" / "dpkg" / "status"
    found = []
    for stanza in status.read_text().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if fields.get("Status") != "install ok installed" or "Package" not in fields:
            continue
        name, version, arch = fields["Package"], fields["Version"], fields.get("Architecture")
        purl = PackageURL("deb", "debian", name, version, {"arch": arch} if arch else None)
        found.append(Component(name=name, version=version, purl=purl, bom_ref=str(purl)))
    return found


def python_distributions(rootfs: Path, pattern: str = VENV_GLOB) -> list[Component]:
    """Each distribution of the image's virtualenv (or of ``pattern``), from its METADATA."""
    found = []
    for meta in sorted(rootfs.glob(pattern)):
        headers = email.parser.Parser().parsestr(meta.read_text(errors="replace"), headersonly=True)
        name, version = headers["Name"], headers["Version"]
        purl = PackageURL("pypi", None, name.lower().replace("_", "-"), version)
        found.append(Component(name=name, version=version, purl=purl, bom_ref=str(purl)))
    return found


def sbom(rootfs: Path, name: str, version: str) -> str:
    image = Component(
        name=name, version=version, type=ComponentType.CONTAINER, bom_ref=f"{name}@{version}"
    )
    return _validated(image, debian_packages(rootfs) + python_distributions(rootfs))


def distribution_sbom(site_packages: Path, name: str, version: str) -> str:
    """The SBOM of an application shipped with its site-packages (the krew zipapp)."""
    app = Component(
        name=name, version=version, type=ComponentType.APPLICATION, bom_ref=f"{name}@{version}"
    )
    own = name.lower().replace("_", "-")
    held = [
        c
        for c in python_distributions(site_packages, "*.dist-info/METADATA")
        if c.name.lower().replace("_", "-") != own  # the application itself is the subject
    ]
    return _validated(app, held)


def _validated(subject: Component, components: list[Component]) -> str:
    bom = Bom()
    bom.metadata.component = subject
    for component in components:
        bom.components.add(component)
    bom.register_dependency(subject, components)  # the subject holds each, directly
    text = JsonV1Dot6(bom).output_as_string(indent=1)
    problem = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if problem is not None:
        raise SystemExit(f"sbom.py: the SBOM does not validate: {problem}")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rootfs", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--name", default="dmrollout")
    parser.add_argument("--version", required=True)
    args = parser.parse_args()
    args.out.write_text(sbom(args.rootfs, args.name, args.version))
    print(f"{args.out}: {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
