// Package badinput runs the "Bad inputs tried" table of RELIABILITY.md
// (rows B1–B22 and B24) against the real `pier run` binary and real
// HAProxy: a victim Ingress is kept under load while, row by row, an
// attacker's manifests are written, judged and removed. Every row checks
// the attacker's verdict and that nothing else was touched: the victim's
// haproxy.conf, HAProxy reloads, the victim's traffic, and the files pier
// writes. Rows the API server would already refuse (†) are also run
// directly against translate.Ingresses. The tests live in _test.go files;
// this file only names the package.
package badinput
