"""The image's software bill of materials (issue 38 item 5): every Debian package dpkg installed
and every Python distribution in the image's virtualenv, as CycloneDX 1.6 JSON, built with the
CycloneDX project's own library and checked against its schema before it is written.

    .venv/bin/python hack/sbom.py ROOTFS OUT.cdx.json --name dmrollout --version 0.1.0

ROOTFS is the image's file system (``buildah mount``; ``make release`` does it). Read, never
executed: nothing of the image runs on the host.
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


def python_distributions(rootfs: Path) -> list[Component]:
    """Each distribution of the image's virtualenv, from its METADATA."""
    found = []
    for meta in sorted(rootfs.glob(VENV_GLOB)):
        headers = email.parser.Parser().parsestr(meta.read_text(errors="replace"), headersonly=True)
        name, version = headers["Name"], headers["Version"]
        purl = PackageURL("pypi", None, name.lower().replace("_", "-"), version)
        found.append(Component(name=name, version=version, purl=purl, bom_ref=str(purl)))
    return found


def sbom(rootfs: Path, name: str, version: str) -> str:
    bom = Bom()
    image = Component(
        name=name, version=version, type=ComponentType.CONTAINER, bom_ref=f"{name}@{version}"
    )
    bom.metadata.component = image
    components = debian_packages(rootfs) + python_distributions(rootfs)
    for component in components:
        bom.components.add(component)
    bom.register_dependency(image, components)  # the image holds each, directly
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
