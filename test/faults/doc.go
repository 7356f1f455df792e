// Package faults runs the load and fault tests that `pier run` can run on
// one machine: load held during change (config churn, a reload storm,
// endpoint churn, Secret rotation, a refused config) and faults survived
// (the HAProxy worker killed, pier killed, backends removed, pier killed
// during churn or after a member change). Each test drives the real pier binary
// and real HAProxy with both load profiles (keep-alive and
// connection-per-request) running, and logs the figures it asserts on
// (requests, errors, reloads, outage windows, config hashes) so that they
// can be quoted.
//
// Faults that need the Kubernetes mode, keepalived or several nodes
// (leader hand-over, API-server outages, a killed agent, a cut link) are in
// test/kubemode, test/pair and test/kubepair.
//
// The tests share two cores with other work and measure timing, so none
// of them runs in parallel.
package faults
