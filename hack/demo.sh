#!/usr/bin/env bash
# The local demo with the Temporal UI reachable from a browser on this host: a bridge listens
# on the host's 127.0.0.1:8233 and relays over a Unix socket into the private network namespace
# where everything else runs (localenv/bridge.py). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
sock="$(mktemp -u /tmp/dmrollout-ui-XXXXXX.sock)"
.venv/bin/python -m localenv.bridge outside --listen 127.0.0.1:8233 --unix "$sock" &
bridge=$!
trap 'kill "$bridge" 2>/dev/null || true; rm -f "$sock"' EXIT
DMROLLOUT_UI_SOCKET="$sock" hack/in-netns.sh .venv/bin/dmrollout demo "$@"
