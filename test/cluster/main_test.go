//go:build linux

package cluster

import "testing"

// TestMain stops the shared cluster after the tests, also when one failed.
func TestMain(m *testing.M) { Main(m) }
