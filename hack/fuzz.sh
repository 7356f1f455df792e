#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for FUZZTIME each: a duration
# (default 5m) or a count of executions such as 20000x (hack/test.sh uses a
# count). New crashers land in the package's testdata/fuzz/ folder: commit
# them, they become regression seeds.
#
#   hack/fuzz.sh                     all targets, 5 minutes each
#   FUZZTIME=30m hack/fuzz.sh        longer
#   hack/fuzz.sh ./internal/encode   one package
#
# Go 1.26's fuzz coordinator can end a duration run with "context deadline
# exceeded" and no failing input (go.dev/issue/75804, fixed in Go 1.27). A
# count-based FUZZTIME never hits it; for durations, that exact result with
# no new file under testdata/fuzz/ is reported as the toolchain race, not as
# a failure. A real failure always writes its input there.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
time=${FUZZTIME:-5m}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || mapfile -t pkgs < <(go list ./...)

inputs() { { find "$1/testdata/fuzz/$2" -type f 2>/dev/null || true; } | sort; }

for pkg in "${pkgs[@]}"; do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz $pkg $target ($time)" >&2
    before=$(inputs "$dir" "$target")
    # -fuzzminimizetime bounds minimisation: a crasher is reported promptly.
    if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -fuzzminimizetime 10s "$pkg" >"$log" 2>&1; then
      continue
    fi
    if grep -q 'context deadline exceeded' "$log" && [ "$before" = "$(inputs "$dir" "$target")" ]; then
      echo "fuzz: $pkg $target: Go fuzz coordinator deadline race (go.dev/issue/75804), no failing input: not a failure" >&2
      continue
    fi
    cat "$log" >&2
    echo "fuzz: $pkg $target failed; its failing input is under $dir/testdata/fuzz/$target/" >&2
    # Print the new input too: on a CI machine the file is gone with the
    # machine, and the log is all that is left to reproduce it from. Go
    # writes it as quoted literals, so it is printable; long ones are cut.
    for f in $(comm -13 <(echo "$before") <(inputs "$dir" "$target")); do
      echo "fuzz: failing input $(basename "$f") (first 8 KiB; save it as testdata/fuzz/$target/$(basename "$f") to replay):" >&2
      head -c 8192 "$f" | cat -v >&2
      echo >&2
    done
    exit 1
  done
done
echo "fuzz: all targets ran for $time without a failure" >&2
