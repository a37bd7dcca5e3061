#!/usr/bin/env bash
# Build, once, cosign (github.com/sigstore/cosign, from Go modules): `make release` signs its
# artifacts and their provenance with it, and the tests verify them offline (issue 38).
# Output: $DMROLLOUT_CACHE/cosign-<version>/cosign.
#
#   hack/cosign.sh            build what is missing, print the executable's path
#   hack/cosign.sh --print    print the path without building
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=build-once.sh
source "$here/build-once.sh"
version=v2.6.5
cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
exe="$cache/cosign-$version/cosign"

build() {
  echo "cosign.sh: building cosign $version" >&2
  GOBIN="$(dirname "$exe")/.gobin" CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" \
    go install -ldflags "-s -w" "github.com/sigstore/cosign/v2/cmd/cosign@$version"
  mv "$(dirname "$exe")/.gobin/cosign" "$exe"
  rmdir "$(dirname "$exe")/.gobin"
}
BUILD_ONCE_PRINT="${1:-}" build_once "$exe" cosign build
