#!/usr/bin/env bash
# The active/standby pair without a cluster (needs root): installs what is
# missing, builds pier, runs `pier run --nodes 2 -f examples/ha/` in network
# namespaces it creates and removes, sends traffic from a client namespace,
# kills the active HAProxy, then cordons the node holding the addresses, and
# prints one line:
#
#   failover: unplanned <ms> ms, planned <ms> ms, failed requests <n>
#
#   hack/demo-ha.sh           measure and print
#   hack/demo-ha.sh --check   also exit non-zero when a target is missed
#                             (unplanned ≤ 1000 ms, planned ≤ 300 ms, at most
#                             1 failed request: see docs/failover.md)
set -euo pipefail
cd "$(dirname "$0")/.."

hack/deps.sh
hack/build.sh
go build -o bin/pier-demo-ha ./hack/demo-ha
exec bin/pier-demo-ha "$@"
