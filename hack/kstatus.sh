#!/usr/bin/env bash
# Build, once, the kstatus checker (hack/kstatus: sigs.k8s.io/cli-utils' kstatus, the library
# Flux, Helm 4's --wait and kpt judge resources with) the tests run against live
# DecisionModels. Output: $DMROLLOUT_CACHE/kstatus-<source hash>/kstatus.
#
#   hack/kstatus.sh            build what is missing, print the executable's path
#   hack/kstatus.sh --print    print the path without building
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=build-once.sh
source "$here/build-once.sh"
src="$here/kstatus"
cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
key="$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-12)"
exe="$cache/kstatus-$key/kstatus"

build() {
  (cd "$src" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false -trimpath" \
    go build -o "$exe.tmp" . && mv "$exe.tmp" "$exe")
}
BUILD_ONCE_PRINT="${1:-}" build_once "$exe" kstatus build
