#!/usr/bin/env bash
# Build, once, Helm 4 (helm.sh/helm/v4, from Go modules) beside the Helm 3 of hack/testenv.sh:
# the chart is installed, upgraded and uninstalled by both in the tests (issue 38). Helm 4's
# `--wait` judges resources with kstatus. Output: $DMROLLOUT_CACHE/helm-<version>/helm.
#
#   hack/helm4.sh            build what is missing, print the executable's path
#   hack/helm4.sh --print    print the path without building
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=build-once.sh
source "$here/build-once.sh"
version=v4.3.2
cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
exe="$cache/helm-$version/helm"

build() {
  echo "helm4.sh: building helm $version" >&2
  GOBIN="$(dirname "$exe")/.gobin" CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" \
    go install -ldflags "-s -w" "helm.sh/helm/v4/cmd/helm@$version"
  mv "$(dirname "$exe")/.gobin/helm" "$exe"
  rmdir "$(dirname "$exe")/.gobin"
}
BUILD_ONCE_PRINT="${1:-}" build_once "$exe" helm4 build
