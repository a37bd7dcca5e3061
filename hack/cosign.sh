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
BUILD_ONCE_PRINT="${1:-}" go_tool cosign v2.6.5 github.com/sigstore/cosign/v2/cmd/cosign
