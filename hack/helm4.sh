#!/usr/bin/env bash
# Build, once, Helm 4 (helm.sh/helm/v4, from Go modules) beside the Helm 3 of hack/testenv.sh:
# the chart is installed, upgraded and uninstalled by both in the tests (issue 38). Helm 4's
# `--wait` judges resources with kstatus.
# Output: $DMROLLOUT_CACHE/helm-<version>/helm.
#
#   hack/helm4.sh            build what is missing, print the executable's path
#   hack/helm4.sh --print    print the path without building
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=build-once.sh
source "$here/build-once.sh"
BUILD_ONCE_PRINT="${1:-}" go_tool helm v4.3.2 helm.sh/helm/v4/cmd/helm
