//go:build tools

// Package helm pins the Helm command that hack/helm.sh builds; the import
// keeps it (and its dependencies) in go.mod and go.sum.
package helm

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
