#!/usr/bin/env bash
# Install headless Chromium from Debian's packages, for the browser test of the Temporal Web UI
# (tests/e2e/test_temporal_ui.py, marker `browser`). Playwright drives it through its
# executable path; `playwright install` is never used because it downloads a browser build of
# its own, which this machine (and CI) cannot fetch.
#
#   hack/install-browser.sh     # no-op when chromium is already on PATH
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
sudo=""
if [[ "$(id -u)" != "0" ]]; then
  sudo="sudo"
fi
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends chromium
command -v chromium >/dev/null
