#!/usr/bin/env bash
# Build, once, krew (sigs.k8s.io/krew, from Go modules): the tests install kubectl-dm from the
# local manifest and archive that hack/krew_package.py makes, as a user of a krew index would
# (issue 38).
# Output: $DMROLLOUT_CACHE/krew-<version>/krew.
#
#   hack/krew.sh            build what is missing, print the executable's path
#   hack/krew.sh --print    print the path without building
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=build-once.sh
source "$here/build-once.sh"
BUILD_ONCE_PRINT="${1:-}" go_tool krew v0.4.3 sigs.k8s.io/krew/cmd/krew
