#!/usr/bin/env bash
# The whole test suite, exactly what CI runs (.ci/run calls this script):
# installs what is missing, builds pier and the Kubernetes control plane the
# API-server tests run against, vets, runs staticcheck, runs every Go test —
# unit, golden, real-HAProxy integration, bad input, faults, the Kubernetes
# mode against a real kube-apiserver, the five Ingress conformance
# features against both `pier run` and the Kubernetes mode, and the
# upstream Gateway API conformance suite — then render's HAProxy tests,
# bad input and e2e again under HAProxy 3.0 (the image's), the
# concurrent unit packages under the race detector, short fuzz runs and the
# README demo in check mode.
#
# FUZZTIME (default 20000x executions per target) and GOFLAGS can be set
# from outside.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

hack/deps.sh
hack/build.sh
# The Gateway API module of the conformance suite, for its standard CRDs
# (test/kubemode reads v1.7.0's UDPRoute CRD from the module cache; pier's
# own module is older). It needs the suite's Go, which the go command
# fetches from the module proxy on first use.
echo "== Gateway API module of the conformance suite (its CRDs, into the module cache)" >&2
(cd test/gatewayconformance && GOTOOLCHAIN=go1.27.3 go mod download sigs.k8s.io/gateway-api)
echo "== Kubernetes control plane for the API-server tests (built once, cached in .cache/kube)" >&2
start=$(date +%s)
PIER_KUBE_APISERVER=$(hack/test-apiserver.sh | tail -n 1)
export PIER_KUBE_APISERVER
echo "kube-apiserver: $PIER_KUBE_APISERVER ($(( $(date +%s) - start ))s)" >&2

echo "== helm, built from its module (cached in .cache/helm)" >&2
PIER_HELM=$(hack/helm.sh | tail -n 1)
export PIER_HELM

# The images users run, each built twice from scratch and compared to the
# digest (SOURCE_DATE_EPOCH, sorted layers, fixed mtimes); the cluster
# suite below runs the same builds' archives.
echo "== images: reproducible to the digest" >&2
hack/image.sh --check-reproducible agent >/dev/null
hack/image.sh --check-reproducible controller >/dev/null

echo "== gofmt, go vet, staticcheck" >&2
unformatted=$(gofmt -l cmd internal test hack 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
go vet ./...
# Pinned by go.mod's tool directive; its first run on a machine analyses
# every dependency (about 5 min here), later runs use its cache (5 s).
go tool staticcheck ./...

echo "== go test" >&2
export PIER_BIN="$PWD/bin/pier" PIER_CONFORMANCE=1
go build -o bin/testsummary ./hack/testsummary
# The cluster suite (real kubelets, containerd, the chart installed and
# rolled under traffic) runs alone after the rest: it starts two nodes'
# worth of daemons, which would starve the timing-sensitive pair suites if
# they shared the two cores.
set +e
{
  # shellcheck disable=SC2046 # a list of packages
  go test -count=1 -timeout 40m -json $(go list ./... | grep -v '/test/cluster$') 2>&1
  echo $? >.test-status
  go test -count=1 -timeout 25m -json ./test/cluster 2>&1
  echo $? >>.test-status
} | tee .test-output.json | bin/testsummary | tee .test-summary.log
summary=${PIPESTATUS[2]}
set -e
if [ "$(tr -d '\n' <.test-status)" != 00 ] || [ "$summary" != 0 ]; then
  echo "go test failed (full log: .test-output.json)" >&2
  exit 1
fi

# The Kubernetes-mode scale benchmark's quick form (100 Ingresses, 3
# nodes: real API server, two controllers, an agent per node), so that
# the benchmark cannot rot; its figures mean nothing here. About 1 min.
echo "== kube-scale benchmark, quick form (bench TestKubeScale)" >&2
PIER_BENCH_QUICK=1 PIER_BENCH_OUT="$(mktemp -d)" go test -count=1 -run '^TestKubeScale$' -timeout 5m ./bench

# The upstream Gateway API conformance suite (v1.7.0, unmodified): a Go
# module of its own, so its k8s.io/* v0.37 stays out of pier's go.mod, and
# so outside `./...` above. About 1.5 min here (40 core and 19 extended
# tests, all passing), a few more on a first run (its modules' build).
# v1.7.0 needs Go 1.27 and pier stays on 1.26: only this step sets
# GOTOOLCHAIN, and its first run on a machine fetches that toolchain from
# the Go module proxy (about 76 MB, 10 s) into the module cache.
# The report goes to a temporary file, not over docs/conformance/.
echo "== Gateway API conformance (test/gatewayconformance)" >&2
(cd test/gatewayconformance && export GOTOOLCHAIN=go1.27.3 && go vet . &&
  GATEWAY_CONFORMANCE_REPORT="$(mktemp)" go test -count=1 -timeout 15m .)

# HAProxy 3.0 beside 2.6: the host (bookworm) runs 2.6, pier's agent image
# (trixie) ships 3.0. hack/haproxy30.sh extracts trixie's haproxy and its
# libraries with mmdebstrap into .cache/haproxy30 (about 5 min on a first
# run, cached after) and prints a binary that runs from there; first on
# PATH, it is the `haproxy` of render's real-HAProxy tests (`haproxy -c
# -dW`, warnings fatal, and the integration tests that serve traffic), of
# the bad-input suite and of the e2e suite (`pier run` execs it, reloads
# it). About 5 min here with 3.0 cached (render 84 s, bad input 73 s and
# e2e 208 s side by side, measured at a load average of 10-20 on 2 cores),
# plus the first extraction. See docs/architecture.md, "HAProxy versions".
echo "== HAProxy 3.0: render's integration tests, test/badinput, test/e2e" >&2
start=$(date +%s)
haproxy30=$(hack/haproxy30.sh | tail -n 1)
PATH="$(dirname "$haproxy30"):$PATH" go test -count=1 -timeout 20m \
  ./internal/haproxy/render ./test/badinput ./test/e2e
echo "HAProxy 3.0 step: $(( $(date +%s) - start ))s" >&2

# The unit packages that run goroutines or share state, again under the race
# detector. Not the suites under test/: they mostly drive bin/pier as a
# process, which -race on the test binary does not instrument, and take
# minutes. About 40 s with a warm build cache, 4 min on a first run (the race
# build of client-go).
echo "== go test -race (unit packages with concurrency)" >&2
go test -race -count=1 -timeout 10m \
  ./internal/store/... ./internal/pipeline ./internal/agent ./internal/agent/haproxydriver ./internal/haproxy/process \
  ./internal/source/... ./internal/api ./internal/cluster ./internal/standalone \
  ./internal/controller ./internal/ipam ./internal/echo

# pier itself built with -race under a process suite: the pipeline and
# `pier run` have no unit tests of their own. RACE_SUITES widens it (e.g.
# "./test/e2e ./test/kubemode", +1.5 min); a report fails the run.
echo "== bin/pier-race under ${RACE_SUITES:=./test/e2e}" >&2
go build -race -trimpath -o bin/pier-race ./cmd/pier
racedir=$(mktemp -d)
# shellcheck disable=SC2086 # RACE_SUITES is a list of packages
PIER_BIN="$PWD/bin/pier-race" GORACE="log_path=$racedir/race" \
  go test -count=1 -timeout 15m $RACE_SUITES
if compgen -G "$racedir/race.*" >/dev/null; then
  cat "$racedir"/race.* >&2
  echo "data race in bin/pier-race (reports above)" >&2
  exit 1
fi

# A count, not a duration: Go 1.26's duration-based fuzzing can fail at its
# deadline with no input (go.dev/issue/75804); see hack/fuzz.sh.
echo "== fuzz (${FUZZTIME:-20000x} per target; hack/fuzz.sh runs longer)" >&2
FUZZTIME=${FUZZTIME:-20000x} hack/fuzz.sh

echo "== README demo (check mode)" >&2
STATE_DIR="$(mktemp -d)/demo" hack/demo.sh --check

echo "== README failover demo (check mode)" >&2
hack/demo-ha.sh --check

# The closing line, repeated last so CI reads it: counts of top-level tests.
tail -n 1 .test-summary.log
