// Package tenants runs tenant-isolation attacks against the real `pier run`
// binary and real HAProxy: a tenant who may only create objects in its own
// namespace tries to take a victim's addresses, hosts and certificates, or
// to break the victim's load balancer with a certificate OpenSSL refuses.
// Each test runs the attack and checks the victim unchanged: the same VIP
// and FIP, the same backend answering its host, the same certificate
// presented (checked with a TLS client). The tests live in _test.go files.
package tenants
