#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for FUZZTIME each (default 5m;
# hack/test.sh runs it with 10s). New crashers land in the package's
# testdata/fuzz/ folder: commit them, they become regression seeds.
#
#   hack/fuzz.sh                  all targets, 5 minutes each
#   FUZZTIME=30m hack/fuzz.sh     longer
#   hack/fuzz.sh ./internal/encode   one package
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
time=${FUZZTIME:-5m}
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || mapfile -t pkgs < <(go list ./...)
for pkg in "${pkgs[@]}"; do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz $pkg $target ($time)" >&2
    # -fuzzminimizetime bounds minimisation: a crasher is reported promptly.
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -fuzzminimizetime 10s "$pkg" >/dev/null
  done
done
echo "fuzz: all targets ran for $time without a failure" >&2
