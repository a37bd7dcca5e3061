#!/usr/bin/env bash
# Install the daemonless image tools from Debian's packages, for `make image` (hack/image.sh):
# mmdebstrap makes the Debian base, buildah builds and runs the Dockerfile, podman imports the
# base, uidmap gives buildah its user namespaces. No Docker engine: none runs here, and buildah
# needs no daemon. The list is hack/host-tools.txt (need: image); a no-op when all are here.
set -euo pipefail
exec bash "$(dirname "$0")/install-host-tools.sh" image
