#!/usr/bin/env bash
# Install headless Chromium (and every other program `make test` needs) from Debian's packages.
# Playwright drives Debian's chromium through its executable path; `playwright install` is never
# used because it downloads a browser build of its own, which this machine (and CI) cannot fetch.
# The list of programs is hack/host-tools.txt; hack/install-host-tools.sh installs them.
set -euo pipefail
exec bash "$(dirname "$0")/install-host-tools.sh" test
