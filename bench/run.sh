#!/usr/bin/env bash
# Runs every pier benchmark and writes bench/results/<UTC time>-<rev>.md and
# .json, then prints the tables. docs/benchmarks.md says what each number
# means. Takes about 3.5 minutes; needs no network but loopback once HAProxy,
# wrk and the Go modules are installed.
#
#   bench/run.sh                     # the full run
#   PIER_BENCH_QUICK=1 bench/run.sh  # seconds-long smoke run: checks the
#                                    # harness works, its numbers mean nothing
#   bench/run.sh scale               # only the scale set (section 9): 100,
#                                    # 1,000 and 3,000 Ingresses, endpoint
#                                    # changes, new Ingresses; writes
#                                    # bench/results/<time>-<rev>-scale.md,
#                                    # .json and the charts in docs/benchmarks/
#                                    # (PIER_BENCH_SCALE=1 does the same)
#   bench/run.sh kube-scale          # only the Kubernetes mode at scale
#                                    # (section 11): a real kube-apiserver,
#                                    # two `pier controller`, one `pier agent`
#                                    # per node; 100, 1,000, 3,000 and 10,000
#                                    # Ingresses (PIER_BENCH_KUBE_SIZES) on 10
#                                    # and 50 nodes (PIER_BENCH_KUBE_NODES);
#                                    # writes bench/results/<time>-<rev>-kube-scale.md
#                                    # and .json (needs root: lab namespaces)
#   bench/run.sh versions            # only the data plane under HAProxy 2.6
#                                    # (the host's) and 3.0 (Debian trixie's,
#                                    # hack/haproxy30.sh), interleaved
#                                    # (section 1b): bench/results/<time>-<rev>-versions.md
#                                    # and .json (about 3 minutes, plus the
#                                    # first extraction of 3.0)
#   bench/run.sh regex-cost          # only the costliest accepted regular
#                                    # expressions (section 12):
#                                    # bench/results/<time>-<rev>-regexcost.md
#   bench/run.sh extras              # only the extras' prices (section 6):
#                                    # bench/results/<time>-<rev>-extras.md
#                                    # and .json (about 8 minutes)
#   bench/run.sh ecmp                # only the native provider's ECMP path
#                                    # with 1, 2 and 3 nodes against direct
#                                    # (section 13), in the namespace lab:
#                                    # bench/results/<time>-<rev>-ecmp.md
#                                    # and .json (about 4 minutes; needs root,
#                                    # bird and nft)
#   bench/run.sh gateway-l4          # only the Gateway API's GRPCRoute,
#                                    # TLSRoute and UDPRoute through `pier
#                                    # run`, a hand-written HAProxy config and
#                                    # direct (section 14), in a namespace of
#                                    # its own: bench/results/<time>-<rev>-gateway-l4.md
#                                    # and .json (about 3 minutes; needs root
#                                    # and nft)
#
# Installs only what hack/deps.sh installs, plus wrk from Debian if missing.
# Builds into bench/.cache; raw results go to a temporary folder, removed
# at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

hack/deps.sh
if ! command -v wrk >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "bench: need root or sudo to install wrk" >&2; exit 1; }
    sudo=sudo
  fi
  echo "bench: installing wrk from Debian" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi

cache="$PWD/bench/.cache"
raw="$(mktemp -d "${TMPDIR:-/tmp}/pier-bench.XXXXXX")"
trap 'rm -rf "$raw"' EXIT
date +%s >"$raw/start"
cat /proc/loadavg >"$raw/loadavg-start"

mode=all
if [ "${1:-}" = scale ] || [ "${PIER_BENCH_SCALE:-}" = 1 ]; then
  mode=scale
fi
if [ "${1:-}" = extras ]; then
  mode=extras
fi
if [ "${1:-}" = kube-scale ]; then
  mode=kube-scale
fi
if [ "${1:-}" = regex-cost ]; then
  mode=regex-cost
fi
if [ "${1:-}" = versions ]; then
  mode=versions
fi
if [ "${1:-}" = ecmp ]; then
  mode=ecmp
fi
if [ "${1:-}" = gateway-l4 ]; then
  mode=gateway-l4
fi

count=5 benchtime=1s suffix=""
if [ "${PIER_BENCH_QUICK:-}" = 1 ]; then
  count=1 benchtime=1x suffix="-quick"
fi

# scale_run is `bench/run.sh scale` (section 9 of docs/benchmarks.md):
# with `pier run --haproxy-processes 4` and 100, 1,000 and 3,000
# Ingresses present (PIER_BENCH_SCALE_SIZES), a Service's
# member replaced (100 samples, up to 3,000 Ingresses, 0 reloads checked),
# a new Ingress and a new Ingress joining a shared group (20 samples
# each), after requests through one of them, pier against a hand-written
# HAProxy config and direct (keep-alive and close). About 7 minutes on 2
# quiet cores, plus the build. The charts: new-Ingress latency from this
# run, routing req/s from the newest routing results committed.
scale_run() {
  echo "== 9. scale: endpoint change, new Ingress, group join at ${PIER_BENCH_SCALE_SIZES:-100,1000,3000} Ingresses (about 7 minutes)" >&2
  (cd bench && PIER_BIN="$cache/pier" PIER_BENCH_OUT="$raw" "$cache/bench.test" \
    -test.run '^TestScale$' -test.v -test.timeout 30m) >&2
  local out routing
  out="bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo norev)-scale$suffix"
  routing="$(ls bench/results/*-routing.json 2>/dev/null | sort | tail -n 1)"
  echo "== report and charts (routing chart from ${routing:-nothing})" >&2
  local charts=docs/benchmarks
  [ "${PIER_BENCH_QUICK:-}" = 1 ] && charts="$raw/charts" # a smoke run's charts mean nothing: not kept
  "$cache/report" -scale "$raw/scale.json" -out "$out" ${routing:+-routing "$routing"} -charts "$charts"
}

# extras_run prices each of pier's per-request extras (section 6 of
# docs/benchmarks.md): HAProxy one thread on one CPU, wrk and the
# backend on the other, pier and each variant loaded at the same time,
# 9 rounds (1 in a quick run). About 8 minutes; needs 2 CPUs.
extras_run() {
  local out="$1"
  echo "== 6b. the extras, priced (about 8 minutes)" >&2
  (cd bench && PIER_BENCH_OUT="$raw" "$cache/bench.test" \
    -test.run '^TestExtrasCost$' -test.v -test.timeout 30m) >&2
  if [ -f "$raw/extras.json" ]; then # not written when skipped (one CPU)
    cp "$raw/extras.md" "$out-extras.md"
    cp "$raw/extras.json" "$out-extras.json"
  fi
}

# regex_cost_run is `bench/run.sh regex-cost` (section 12 of
# docs/benchmarks.md): a load balancer at the cap of regular-expression
# paths, each of the costliest shape validation accepts, requests that
# work every expression to its match limit, and a neighbour on the same
# HAProxy process meanwhile; pier, the same with prefixes, and a
# hand-written config with and without the match limit. About a minute.
regex_cost_run() {
  local out="$1"
  echo "== 12. the costliest accepted regular expressions (about a minute)" >&2
  (cd bench && PIER_BENCH_OUT="$raw" "$cache/bench.test" \
    -test.run '^TestRegexCost$' -test.v -test.timeout 10m) >&2
  cp "$raw/regexcost.md" "$out-regexcost.md"
  cp "$raw/regexcost.json" "$out-regexcost.json"
}

# kube_scale_run is `bench/run.sh kube-scale` (section 11 of
# docs/benchmarks.md): pier's Kubernetes mode against a real etcd and
# kube-apiserver, the controller as two leader-elected `pier controller`
# processes, one `pier agent` per node (real HAProxy on up to 10 nodes,
# PIER_BENCH_KUBE_HAPROXY_NODES, each in a lab namespace; the others
# idle). PIER_BENCH_KUBE_API_RATE=5/10 runs every pier process at that
# --kube-api-qps/--kube-api-burst. One world per size and node count:
# about 2 minutes at 1,000 Ingresses, 5 at 3,000; PIER_BENCH_QUICK=1
# (100 Ingresses, 3 nodes, a few samples) takes about 90 s.
kube_scale_run() {
  echo "== 11. kube-scale: ${PIER_BENCH_KUBE_SIZES:-100,1000,3000,10000} Ingresses on ${PIER_BENCH_KUBE_NODES:-10,50} nodes" >&2
  PIER_KUBE_APISERVER="${PIER_KUBE_APISERVER:-$(hack/test-apiserver.sh | tail -n 1)}"
  export PIER_KUBE_APISERVER
  local out status=0
  out="bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo norev)-kube-scale$suffix"
  (cd bench && PIER_BIN="$cache/pier" PIER_BENCH_OUT="$raw" "$cache/bench.test" \
    -test.run '^TestKubeScale$' -test.v -test.timeout 60m) >&2 || status=$?
  # A failed size keeps pier's logs in $raw, which the exit trap removes:
  # move them beside the results first.
  for logs in "$raw"/kube-logs-*; do
    [ -d "$logs" ] || continue
    mkdir -p "$out-logs"
    mv "$logs" "$out-logs/"
    echo "bench: pier's logs of a failed size kept in $out-logs" >&2
  done
  [ "$status" = 0 ] || exit "$status"
  "$cache/report" -kube-scale "$raw/kube-scale.json" -out "$out"
}

# versions_run is `bench/run.sh versions` (section 1b of
# docs/benchmarks.md): TestDataPlane's two configs under the host's
# HAProxy and under Debian trixie's 3.0, four instances measured in turn
# in each round. PIER_BENCH_VERSIONS_ROUNDS (3) and
# PIER_BENCH_VERSIONS_SECONDS (10) shorten it on a shared machine.
versions_run() {
  local out="$1" bin30
  bin30="$(hack/haproxy30.sh | tail -n 1)"
  echo "== 1b. data plane under HAProxy 2.6 and 3.0 ($bin30)" >&2
  (cd bench && PIER_BENCH_OUT="$raw" PIER_BENCH_HAPROXY30="$bin30" "$cache/bench.test" \
    -test.run '^TestDataPlaneVersions$' -test.v -test.timeout 20m) >&2
  cp "$raw/versions.md" "$out-versions.md"
  cp "$raw/versions.json" "$out-versions.json"
}

# ecmp_run is `bench/run.sh ecmp` (section 13 of docs/benchmarks.md):
# the ECMP lab of test/ecmp (bird with multipath, three nodes running the
# agent's native driver and BGP mover, a client and the endpoints, each in
# a namespace of its own), wrk from the client with 64 connections, new
# connections and keep-alive, direct and through the VIP with 1, 2 and 3
# nodes in the ECMP set, interleaved in every round.
# PIER_BENCH_ECMP_ROUNDS (5) and PIER_BENCH_ECMP_SECONDS (5) set its size.
ecmp_run() {
  local out="$1"
  echo "== 13. the ECMP path with 1, 2 and 3 nodes against direct (about 4 minutes)" >&2
  (cd bench && PIER_BENCH_OUT="$raw" "$cache/bench.test" \
    -test.run '^TestECMP$' -test.v -test.timeout 15m) >&2
  cp "$raw/ecmp.md" "$out-ecmp.md"
  cp "$raw/ecmp.json" "$out-ecmp.json"
}

# gateway_l4_run is `bench/run.sh gateway-l4` (section 14 of
# docs/benchmarks.md): TestGatewayL4 in a network namespace made for it
# (pier-benchl4-<pid>), so that pier's VIPs and nftables table touch
# nothing of the host's: gRPC unary calls (GRPCRoute, h2c), TLS
# passthrough connections, new and kept alive (TLSRoute), through pier,
# a hand-written HAProxy config and direct, and UDP round trips
# (UDPRoute, nftables DNAT) through pier and direct, interleaved.
# PIER_BENCH_L4_ROUNDS (5), PIER_BENCH_L4_SECONDS (3) and
# PIER_BENCH_L4_WORKERS (16) set its size. The namespace and whatever
# still runs in it are removed on exit, failure included.
gateway_l4_run() {
  local out="$1" ns="pier-benchl4-$$" status=0
  [ "$(id -u)" = 0 ] || { echo "bench: gateway-l4 needs root (a network namespace, nftables)" >&2; exit 1; }
  echo "== 14. Gateway API gRPC, TLS passthrough and UDP against a hand-written config and direct (about 3 minutes)" >&2
  ip netns add "$ns"
  trap 'for p in $(ip netns pids "'"$ns"'" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done; ip netns del "'"$ns"'" 2>/dev/null || true; rm -rf "$raw"' EXIT
  (cd bench && PIER_BIN="$cache/pier" PIER_BENCH_OUT="$raw" PIER_BENCH_L4_NETNS="$ns" \
    ip netns exec "$ns" "$cache/bench.test" -test.run '^TestGatewayL4$' -test.v -test.timeout 10m) >&2 || status=$?
  [ "$status" = 0 ] || exit "$status"
  cp "$raw/gateway-l4.md" "$out-gateway-l4.md"
  cp "$raw/gateway-l4.json" "$out-gateway-l4.json"
}

echo "== build (into bench/.cache)" >&2
mkdir -p "$cache" bench/results
go build -trimpath -o "$cache/pier" ./cmd/pier
go test -c -o "$cache/bench.test" ./bench
go build -o "$cache/report" ./bench/report

if [ "$mode" = scale ]; then
  scale_run
  exit 0
fi
if [ "$mode" = kube-scale ]; then
  kube_scale_run
  exit 0
fi
if [ "$mode" = regex-cost ]; then
  regex_cost_run "bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo norev)$suffix"
  exit 0
fi
if [ "$mode" = versions ]; then
  versions_run "bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo norev)$suffix"
  exit 0
fi
if [ "$mode" = ecmp ]; then
  ecmp_run "bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo norev)$suffix"
  exit 0
fi
if [ "$mode" = gateway-l4 ]; then
  gateway_l4_run "bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo norev)$suffix"
  exit 0
fi
if [ "$mode" = extras ]; then
  extras_run "bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo norev)$suffix"
  exit 0
fi

echo "== 2. control plane: Go benchmarks, -count $count (about a minute)" >&2
(cd bench && "$cache/bench.test" -test.run '^$' -test.bench . -test.benchmem \
  -test.count "$count" -test.benchtime "$benchtime") | tee "$raw/controlplane.txt" >&2

echo "== 1. data plane (wrk, about 2.5 minutes), 4. memory, 3. reload, 5. web view (about 30 s), 6. routing (about 4 minutes)" >&2
(cd bench && PIER_BIN="$cache/pier" PIER_BENCH_OUT="$raw" "$cache/bench.test" \
  -test.run '^(TestDataPlane|TestMemory|TestReload|TestWeb|TestRouting)$' -test.v -test.timeout 20m) >&2

out="bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo norev)$suffix"
echo "== report" >&2
"$cache/report" -in "$raw" -out "$out"

# 7. The native provider: cost per TCP connection direct to a
# pod, through the native VIP (nftables DNAT) and through HAProxy in mode
# tcp, interleaved in one run, in network namespaces (root only). Raw Go
# benchmark output, next to the report.
if [ "$(id -u)" = 0 ] && command -v nft >/dev/null 2>&1; then
  echo "== 7. native L4 against direct and HAProxy mode tcp (about 30 s)" >&2
  n=3000
  [ "${PIER_BENCH_QUICK:-}" = 1 ] && n=50
  go test ./internal/agent/nativedriver -run '^$' -bench . -benchtime "${n}x" -count "$count" | tee "$out-native.txt" >&2
else
  echo "== 7. native L4: skipped (needs root and nft)" >&2
fi

# 8. Shards: n Ingresses with `pier run --haproxy-processes 4`,
# then with one HAProxy process per load balancer (at most 250 of them):
# time until all serve, processes, memory, reloads. 3,000 by default, the
# figure in docs/benchmarks.md (about a minute: the applies waiting for a
# shard are loaded with one reload); pier's logs go beside the JSON.
echo "== 8. shards (about a minute)" >&2
shards=${PIER_BENCH_SHARDS_N:-3000}
[ "${PIER_BENCH_QUICK:-}" = 1 ] && shards=100
(cd bench && PIER_BIN="$cache/pier" PIER_BENCH_OUT="$raw" PIER_BENCH_SHARDS_N="$shards" "$cache/bench.test" \
  -test.run '^TestShards$' -test.v -test.timeout 20m) >&2
cp "$raw/shards.json" "$out-shards.json"

extras_run "$out"
