#!/usr/bin/env bash
# Runs a command while busy loops take every CPU: two per core, at the
# command's own priority, so that the command competes for each core
# with two processes that never sleep. The failover suites must hold on a
# node whose CPUs are saturated, which is where a missed deadline
# (an advert, a lease renewal, a health tick) shows. The loops stop when
# the command ends, however it ends; the exit status is the command's.
#
#   hack/cpuhog.sh go test -run TestKubePair ./test/kubepair
set -euo pipefail
if [ "$#" = 0 ]; then
  echo "usage: hack/cpuhog.sh COMMAND [ARG...]" >&2
  exit 2
fi
loops=$(( $(nproc) * ${CPUHOG_PER_CORE:-2} ))
pids=() cmd=""
stop() {
  [ -z "$cmd" ] || kill "$cmd" 2>/dev/null || true
  [ "${#pids[@]}" = 0 ] || kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop EXIT
trap 'exit 143' INT TERM
for _ in $(seq "$loops"); do
  (while :; do :; done) &
  pids+=($!)
done
echo "cpuhog: $loops busy loops on $(nproc) CPUs beside: $*" >&2
# In the background and waited for, so that a signal to this script stops
# the command and the loops at once rather than after the command.
"$@" &
cmd=$!
set +e
wait "$cmd"
status=$?
set -e
cmd=""
exit "$status"
