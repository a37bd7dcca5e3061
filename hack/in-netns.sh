#!/usr/bin/env bash
# Run a command inside a private network namespace made for this run: a loopback interface
# (up) and an interface `dmsim0` that owns the simulated Pod network 100.72.0.0/16 as a
# local route (every address in it is an address of this namespace, like 127/8 on lo).
# Why not Pod IPs on 127/8: the API server refuses loopback addresses in EndpointSlices, so
# Services could never have endpoints. Why 100.72/16 (shared address space, RFC 6598): it is
# none of the private ranges 10/8, 172.16/12, 192.168/16, and it exists only in here.
# Nothing inside can reach the host network, so tests, the local cluster and the simulators
# can never send a packet to a private-range or public address outside.
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
  # The kernel here has no `dummy` link type ("Unknown device type"); a veth pair with both
  # ends inside this namespace is the stand-in: no peer outside, so no packet can leave.
  ip link add dmsim0 type veth peer name dmsim0p
  ip link set dmsim0p up
  ip link set dmsim0 up
  ip addr add 100.72.0.1/32 dev dmsim0
  ip route add local 100.72.0.0/16 dev dmsim0
  export DMROLLOUT_NETNS=1
  # kubectl and helm cache discovery per host:port under ~/.kube/cache; every namespace has
  # its own 127.0.0.1:6443, so a shared cache hands one cluster the API of another (CI:
  # `kubectl get dmrollout` listed a CRD only the other xdist worker had, and failed).
  base="${TMPDIR:-/tmp}/dmrollout-kube-cache"
  mkdir -p "$base"
  for old in "$base"/*; do
    if [[ -e "$old" ]] && ! kill -0 "${old##*/}" 2>/dev/null; then rm -rf "$old"; fi
  done
  export KUBECACHEDIR="$base/$$"
  exec "$@"
' in-netns "$@"
