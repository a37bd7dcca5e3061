#!/usr/bin/env bash
# Install, from Debian's packages, the programs the project runs outside the virtualenv and the
# control-plane cache (the list with who needs each: hack/host-tools.txt; a unit test keeps the
# two in step). A no-op for what is already installed: apt-get is only called when one is missing.
#
#   hack/install-host-tools.sh test     # what `make test` runs (chaos faults, browser checks, ...)
#   hack/install-host-tools.sh image    # what `make image` runs (mmdebstrap, buildah, podman)
set -euo pipefail
need="${1:-test}"
case "$need" in
  test) programs=(unshare ip flock sha256sum openssl iptables tmux chromium pgrep git) ;;
  image) programs=(mmdebstrap buildah podman newuidmap) ;;
  *) echo "install-host-tools.sh: unknown need $need (test or image)" >&2; exit 2 ;;
esac
missing=0
for program in "${programs[@]}"; do
  command -v "$program" >/dev/null 2>&1 || missing=1
done
[[ $missing -eq 0 ]] && exit 0
sudo=""
[[ "$(id -u)" != "0" ]] && sudo="sudo"
$sudo apt-get update -q
export DEBIAN_FRONTEND=noninteractive
# The packages by name, one install line per need (a reader, or a scan, sees what is installed).
case "$need" in
  test) $sudo apt-get install -y -q --no-install-recommends util-linux iproute2 coreutils openssl iptables tmux chromium procps git ;;
  image) $sudo apt-get install -y -q --no-install-recommends mmdebstrap buildah podman uidmap ;;
esac
