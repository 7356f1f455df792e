//go:build !linux

package lab

// KillIn does nothing off Linux: there are no network namespaces, so no
// process can be in one.
func KillIn(ns string) []int { return nil }

// RemoveStale does nothing off Linux (see KillIn).
func RemoveStale(prefix string) {}

// PidsIn finds nothing off Linux.
func PidsIn(ns, comm string) []int { return nil }
