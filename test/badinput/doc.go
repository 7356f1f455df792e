// Package badinput runs a table of hostile inputs (injection through
// paths, hosts and annotations, snippets, oversized annotations, bad TLS
// Secrets, cross-namespace Secrets, bad backends, path conflicts, 1,000
// paths) against the real `pier run` binary and real HAProxy: a victim
// Ingress is kept under load while, row by row, an attacker's manifests
// are written, judged and removed. Every row checks
// the attacker's verdict and that nothing else was touched: the victim's
// haproxy.conf, HAProxy reloads, the victim's traffic, and the files pier
// writes. Inputs the API server would already refuse are also run
// directly against translate.Ingresses. The tests live in _test.go files;
// this file only names the package.
package badinput
