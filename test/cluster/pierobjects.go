//go:build linux

package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type networkingIngress = networkingv1.Ingress

// newIngress is an Ingress of class pier sending every path of host to
// service:port.
func newIngress(ns, name, host, service string, port int32) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	class := "pier"
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: service, Port: networkingv1.ServiceBackendPort{Number: port},
						}},
					}},
				}},
			}},
		},
	}
}

// PodLogTail is the last n lines of every container log the kubelets
// wrote for the pod (below each node's podLogsDir), read from disk: the
// API server here has no client certificate for the kubelets' log
// endpoint.
func (c *Cluster) PodLogTail(ns, name string, n int) string {
	var b strings.Builder
	for _, node := range c.Nodes {
		dirs, _ := filepath.Glob(filepath.Join(node.path("logs"), ns+"_"+name+"_*", "*"))
		sort.Strings(dirs)
		for _, dir := range dirs {
			files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			sort.Strings(files)
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					continue
				}
				lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
				if len(lines) > n {
					lines = lines[len(lines)-n:]
				}
				fmt.Fprintf(&b, "== %s\n%s\n", f, strings.Join(lines, "\n"))
			}
		}
	}
	return b.String()
}

// FollowPodLog keeps copies of the pod's container logs while the pod
// ends (the kubelet removes them with it); the returned function stops
// following and gives the last n lines seen.
func (c *Cluster) FollowPodLog(ns, name string, n int) func() string {
	stop := make(chan struct{})
	done := make(chan string)
	go func() {
		last := ""
		for {
			if got := c.PodLogTail(ns, name, n); got != "" {
				last = got
			}
			select {
			case <-stop:
				done <- last
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() string { close(stop); return <-done }
}
