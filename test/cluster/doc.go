// Package cluster runs a small Kubernetes cluster with real nodes for the
// suites that install pier as pods: the control plane of test/kubeapi
// (etcd, kube-apiserver, kube-controller-manager) and kube-scheduler in
// the test's own network namespace, and two nodes, each a containerd and a
// kubelet inside a network namespace of an internal/lab network, in the
// host's mount namespace.
//
//	root namespace: etcd, kube-apiserver 127.0.0.1:P, kcm, kube-scheduler,
//	                relay 10.97.0.1:R → 127.0.0.1:P (kubelets and pods)
//	        │ pchost 10.97.0.1 (routes 10.98.N.0/24 via node N)
//	  pcsw br0 ── pcn0 eth0 10.97.0.11  containerd, kubelet; cni0 10.98.0.1/24
//	           ── pcn1 eth0 10.97.0.12  containerd, kubelet; cni0 10.98.1.1/24
//	           ── pcc  eth0 10.97.0.100 the client (routes to both pod CIDRs)
//
// A test binary starts it once (Shared, first use) and TestMain tears it
// down (Main), also after a failure; Start sweeps what a killed earlier run
// left (processes, mounts, namespaces, folders). Linux and root only; a
// missing prerequisite skips the tests, or fails them under CI.
package cluster
