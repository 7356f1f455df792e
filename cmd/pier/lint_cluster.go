package main

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"pier.dev/pier/internal/cluster"
	"pier.dev/pier/internal/source"
)

// clusterSnapshot lists, once, what translation reads of a live cluster:
// Ingresses and IngressClasses (required), Services, EndpointSlices,
// Secrets and ConfigMaps (each skipped, and named in unlisted, when the
// kubeconfig may not list it). Every list is sorted by namespace/name, as
// files.Load sorts what it reads.
func clusterSnapshot(ctx context.Context, kubeconfig string) (*source.Snapshot, []string, error) {
	cfg, err := cluster.RestConfig(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	snap := &source.Snapshot{}
	all := metav1.ListOptions{}
	ings, err := cs.NetworkingV1().Ingresses("").List(ctx, all)
	if err != nil {
		return nil, nil, fmt.Errorf("list Ingresses: %w", err)
	}
	for i := range ings.Items {
		snap.Ingresses = append(snap.Ingresses, &ings.Items[i])
	}
	classes, err := cs.NetworkingV1().IngressClasses().List(ctx, all)
	if err != nil {
		return nil, nil, fmt.Errorf("list IngressClasses: %w", err)
	}
	for i := range classes.Items {
		snap.IngressClasses = append(snap.IngressClasses, &classes.Items[i])
	}
	unlisted, err := listForbiddable(ctx, cs, snap)
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(snap.Ingresses, func(i, j int) bool {
		a, b := snap.Ingresses[i], snap.Ingresses[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	return snap, unlisted, nil
}

// listForbiddable adds to snap the lists a kubeconfig may be forbidden
// (Services, EndpointSlices, Secrets, ConfigMaps), and names in unlisted
// those it is.
func listForbiddable(ctx context.Context, cs kubernetes.Interface, snap *source.Snapshot) (unlisted []string, err error) {
	all := metav1.ListOptions{}
	for _, l := range []struct {
		what string
		list func() error
	}{
		{"Services", func() error {
			list, err := cs.CoreV1().Services("").List(ctx, all)
			if err != nil {
				return err
			}
			for i := range list.Items {
				snap.Services = append(snap.Services, &list.Items[i])
			}
			return nil
		}},
		{"EndpointSlices", func() error {
			list, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, all)
			if err != nil {
				return err
			}
			for i := range list.Items {
				snap.EndpointSlices = append(snap.EndpointSlices, &list.Items[i])
			}
			return nil
		}},
		{"Secrets", func() error {
			list, err := cs.CoreV1().Secrets("").List(ctx, all)
			if err != nil {
				return err
			}
			for i := range list.Items {
				snap.Secrets = append(snap.Secrets, &list.Items[i])
			}
			return nil
		}},
		{"ConfigMaps", func() error {
			list, err := cs.CoreV1().ConfigMaps("").List(ctx, all)
			if err != nil {
				return err
			}
			for i := range list.Items {
				snap.ConfigMaps = append(snap.ConfigMaps, &list.Items[i])
			}
			return nil
		}},
	} {
		switch err := l.list(); {
		case apierrors.IsForbidden(err):
			unlisted = append(unlisted, l.what+" (forbidden): the Ingresses that name one are judged as if it did not exist")
		case err != nil:
			return nil, fmt.Errorf("list %s: %w", l.what, err)
		}
	}
	return unlisted, nil
}
