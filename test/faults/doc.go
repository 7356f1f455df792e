// Package faults runs the rows of RELIABILITY.md's test matrix that
// `pier run` can run on one machine: load held during change (L1–L5) and
// faults survived (F1, F2, F5, F8). Each test drives the real pier binary
// and real HAProxy with both load profiles (keep-alive and
// connection-per-request) running, and logs the figures it asserts on
// (requests, errors, reloads, outage windows, config hashes) so that they
// can be quoted.
//
// Rows that need the Kubernetes mode, keepalived or HAProxy shards (F3,
// F4, F6, F7, F9, F10, L6) are not here: they wait for those parts.
//
// The tests share two cores with other work and measure timing, so none
// of them runs in parallel.
package faults
