//go:build tools

// Package kube pins the Kubernetes commands that hack/test-apiserver.sh
// builds; the import keeps them (and their dependencies) in go.mod and go.sum.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
