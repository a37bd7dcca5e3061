#!/usr/bin/env bash
# Install the daemonless image tools from Debian's packages, for `make image` (hack/image.sh):
# mmdebstrap makes the Debian base, buildah builds and runs the Dockerfile, podman imports the
# base. No Docker engine: none runs here, and buildah needs no daemon.
#
#   hack/install-image-tools.sh     # no-op when all three are on PATH
set -euo pipefail
missing=()
for tool in mmdebstrap buildah podman; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
sudo=""
if [[ "$(id -u)" != "0" ]]; then
  sudo="sudo"
fi
$sudo apt-get update
# uidmap: buildah's user namespaces; fuse-overlayfs is not needed (vfs or kernel overlay).
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends \
  mmdebstrap buildah podman uidmap
for tool in mmdebstrap buildah podman; do
  command -v "$tool" >/dev/null
done
