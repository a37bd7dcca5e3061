#!/usr/bin/env bash
# Build, once, krew (sigs.k8s.io/krew, from Go modules): the tests install kubectl-dm from the
# local manifest and archive that hack/krew_package.py makes, as a user of a krew index would
# (issue 38). Output: $DMROLLOUT_CACHE/krew-<version>/krew.
#
#   hack/krew.sh            build what is missing, print the executable's path
#   hack/krew.sh --print    print the path without building
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=build-once.sh
source "$here/build-once.sh"
version=v0.4.3
cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
exe="$cache/krew-$version/krew"

build() {
  echo "krew.sh: building krew $version" >&2
  GOBIN="$(dirname "$exe")/.gobin" CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" \
    go install -ldflags "-s -w" "sigs.k8s.io/krew/cmd/krew@$version"
  mv "$(dirname "$exe")/.gobin/krew" "$exe"
  rmdir "$(dirname "$exe")/.gobin"
}
BUILD_ONCE_PRINT="${1:-}" build_once "$exe" krew build
