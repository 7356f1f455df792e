package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// TestIngressChangesEqualFullRebuilds drives two pipelines through the
// same random changes (Ingresses added, edited, removed, joining and
// leaving a group, with conflicting hosts and missing Services; now and
// then a Service or a Secret changed too): one as it runs, one that
// translates everything on every change. After each change both hold the
// same result, the same stored load balancers (addresses included), the
// same problems and publish the same status.
func TestIngressChangesEqualFullRebuilds(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 3))
		inc, snap := benchPipeline(t, 30, 10)
		full, _ := benchPipeline(t, 30, 10)
		logs := &bytes.Buffer{}
		inc.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx := context.Background()
		for step := range 40 {
			next, what := randomChange(rng, snap, step)
			if err := inc.take(ctx, next); err != nil {
				t.Fatal(err)
			}
			full.last.forget()
			if err := full.take(ctx, next); err != nil {
				t.Fatal(err)
			}
			if diff := pipelineDiff(inc, full, next); diff != "" {
				t.Fatalf("seed %d step %d (%s): %s", seed, step, what, diff)
			}
			snap = next
		}
		if n := strings.Count(logs.String(), "reason=ingress incremental=true"); n < 15 {
			t.Errorf("seed %d: %d incremental Ingress rebuilds of 40 changes", seed, n)
		}
	}
}

func pipelineDiff(a, b *Pipeline, snap *source.Snapshot) string {
	if !reflect.DeepEqual(a.result, b.result) {
		return fmt.Sprintf("results differ:\n%+v\n%+v", a.result, b.result)
	}
	if !reflect.DeepEqual(a.index.List(), b.index.List()) {
		return "stored load balancers differ"
	}
	if !reflect.DeepEqual(a.Status.(*memorySink).published, b.Status.(*memorySink).published) {
		return "published status differs"
	}
	for _, ing := range snap.Ingresses {
		ref := model.IngressRef(ing.Namespace, ing.Name)
		if pa, pb := a.Book.Of(ref), b.Book.Of(ref); !reflect.DeepEqual(pa, pb) {
			return fmt.Sprintf("problems of %s differ: %v, %v", ref, pa, pb)
		}
	}
	return ""
}

// randomChange makes one change to a snapshot of benchPipeline: mostly
// to one Ingress, now and then to a Service's port or a TLS Secret.
func randomChange(rng *rand.Rand, snap *source.Snapshot, step int) (*source.Snapshot, string) {
	next := clone(snap)
	next.Secrets = append([]*corev1.Secret(nil), snap.Secrets...)
	rv := fmt.Sprint(100000 + step)
	switch op := rng.IntN(20); {
	case op < 7:
		ing := randomIngress(rng, snap, fmt.Sprintf("new-%d", step), rv, step)
		next.Ingresses = append(next.Ingresses, ing)
		return next, "add " + ing.Name
	case op < 14:
		i := rng.IntN(len(next.Ingresses))
		old := next.Ingresses[i]
		ing := randomIngress(rng, snap, old.Name, rv, step)
		ing.CreationTimestamp = old.CreationTimestamp
		next.Ingresses[i] = ing
		return next, "edit " + ing.Name
	case op < 18:
		i := rng.IntN(len(next.Ingresses))
		name := next.Ingresses[i].Name
		next.Ingresses = append(next.Ingresses[:i:i], next.Ingresses[i+1:]...)
		return next, "remove " + name
	case op < 19:
		i := rng.IntN(len(next.Services))
		svc := next.Services[i].DeepCopy()
		svc.ResourceVersion = rv
		svc.Spec.Ports[0].Port = int32(80 + rng.IntN(2))
		next.Services[i] = svc
		return next, "service " + svc.Name
	default:
		if len(next.Secrets) > 0 {
			next.Secrets = nil
			return next, "secret removed"
		}
		next.Secrets = append(next.Secrets, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls", ResourceVersion: rv}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: []byte("not a certificate"), corev1.TLSPrivateKeyKey: []byte("key")}})
		return next, "secret added"
	}
}

func randomIngress(rng *rand.Rand, snap *source.Snapshot, name, rv string, step int) *networkingv1.Ingress {
	ing := snap.Ingresses[0].DeepCopy()
	ing.Name, ing.UID, ing.ResourceVersion = name, "", rv
	ing.CreationTimestamp = metav1.NewTime(ing.CreationTimestamp.AddDate(0, 0, step+1))
	ing.Annotations = nil
	ing.Spec.TLS = nil
	ing.Spec.Rules[0].Host = fmt.Sprintf("h%d.example.com", rng.IntN(6))
	ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = fmt.Sprintf("web-%d", rng.IntN(len(snap.Services)+2))
	if rng.IntN(3) == 0 {
		ing.Annotations = map[string]string{annotation.LoadBalancer: "shared"}
	}
	if rng.IntN(5) == 0 {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{ing.Spec.Rules[0].Host}, SecretName: "tls"}}
	}
	return ing
}
