#!/usr/bin/env bash
# The image's SBOM beside its archive: build/dmrollout-<version>.sbom.cdx.json (CycloneDX 1.6),
# read from the image's file system (buildah mount; nothing of the image runs) by hack/sbom.py.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
version="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
image_ref="${IMAGE_REF:-localhost/dmrollout:$version}"
out="build/dmrollout-$version.sbom.cdx.json"
ctr="$(buildah from --pull-never "$image_ref")"
trap 'buildah umount "$ctr" >/dev/null 2>&1 || true; buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
rootfs="$(buildah mount "$ctr")"
.venv/bin/python hack/sbom.py "$rootfs" "$out" --name dmrollout --version "$version"
