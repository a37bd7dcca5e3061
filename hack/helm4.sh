#!/usr/bin/env bash
# Build, once, Helm 4 (helm.sh/helm/v4, from Go modules) beside the Helm 3 of hack/testenv.sh:
# the chart is installed, upgraded and uninstalled by both in the tests (issue 38). Helm 4's
# `--wait` judges resources with kstatus. Output: $DMROLLOUT_CACHE/helm-<version>/helm.
#
#   hack/helm4.sh            build what is missing, print the executable's path
#   hack/helm4.sh --print    print the path without building
set -euo pipefail

version=v4.3.2
cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
dir="$cache/helm-$version"
exe="$dir/helm"

if [[ "${1:-}" == "--print" || -x "$exe" ]]; then
  echo "$exe"
  exit 0
fi
command -v go >/dev/null || { echo "helm4.sh: the Go toolchain is required (go not on PATH)" >&2; exit 1; }
mkdir -p "$dir"
exec 9>"$cache/.helm4.lock"
flock 9
if [[ ! -x "$exe" ]]; then
  echo "helm4.sh: building helm $version" >&2
  GOBIN="$dir/.gobin" CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" \
    go install -ldflags "-s -w" "helm.sh/helm/v4/cmd/helm@$version"
  mv "$dir/.gobin/helm" "$exe"
  rmdir "$dir/.gobin"
fi
echo "$exe"
