// Package bench measures pier: the data-plane cost of the HAProxy
// configuration pier renders, the control plane (translate + render), the
// cost of a reload through `pier run`, the memory of one HAProxy
// master-worker pair, and, with 100 to 3,000 Ingresses packed into shards,
// how long an endpoint change or a new Ingress takes to reach traffic
// (TestScale, `bench/run.sh scale`), and the native provider's ECMP path
// with 1, 2 and 3 nodes against direct in test/ecmp's namespace lab
// (TestECMP, `bench/run.sh ecmp`), and the Gateway API's GRPCRoute,
// TLSRoute and UDPRoute through `pier run` against a hand-written HAProxy
// config and direct (TestGatewayL4, `bench/run.sh gateway-l4`). Every figure is reported as a ratio against a
// reference measured in the same invocation, so results from a noisy or
// different machine can still be compared.
//
// Run everything with bench/run.sh; it writes bench/results/<date>-<rev>.md
// and .json. The measurements that need HAProxy, wrk or `pier run` are
// tests that skip unless PIER_BENCH_OUT names a folder to write their raw
// results to; the control-plane measurements are ordinary Go benchmarks.
// docs/benchmarks.md explains every number.
package bench
