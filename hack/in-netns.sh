#!/usr/bin/env bash
# Run a command inside a private network namespace made for this run: only a loopback
# interface (up) and a dummy interface `dmsim0` carrying the simulated Pod network. Nothing
# inside can reach the host network, so tests, the local cluster and the simulators can
# never send a packet to a private-range or public address outside.
#
#   hack/in-netns.sh pytest -q        # run the tests in a fresh namespace
#
# Already inside one (DMROLLOUT_NETNS=1)? Run the command as is.
set -euo pipefail
if [[ "${DMROLLOUT_NETNS:-}" == "1" ]]; then
  exec "$@"
fi
exec unshare --net --fork -- bash -c '
  set -euo pipefail
  ip link set lo up
  export DMROLLOUT_NETNS=1
  exec "$@"
' in-netns "$@"
