package kube

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/storetest"
	"pier.dev/pier/test/kubeapi"
)

func TestMain(m *testing.M) { kubeapi.Main(m, kubeapi.Options{}) }

var (
	crdOnce sync.Once
	crdErr  error
)

// cluster returns the shared API server with the CRD from deploy/ installed:
// the manifest users apply is the one under test.
func cluster(t *testing.T) *kubeapi.Server {
	t.Helper()
	srv := kubeapi.Shared(t)
	crdOnce.Do(func() {
		path, err := kubeapi.RepoPath("deploy", "crd-loadbalancers.yaml")
		if err != nil {
			crdErr = err
			return
		}
		crdErr = kubeapi.ApplyFiles(context.Background(), srv.Config(), path)
	})
	if crdErr != nil {
		t.Fatalf("install CRD: %v", crdErr)
	}
	return srv
}

// newStore returns a store on cfg (the shared server's when nil) over an
// empty collection: LoadBalancers are cluster-scoped, so tests share one
// set and each starts by deleting what the previous one left.
func newStore(t *testing.T, cfg *rest.Config, log *slog.Logger) *Store {
	t.Helper()
	srv := cluster(t)
	if cfg == nil {
		cfg = srv.Config()
	}
	deleteAll(t, srv.Config())
	if log == nil {
		log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := New(cfg, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func deleteAll(t *testing.T, cfg *rest.Config) {
	t.Helper()
	client := dynamic.NewForConfigOrDie(cfg).Resource(Resource)
	ctx := t.Context()
	if err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatalf("delete all load balancers: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := client.List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("load balancers still present 30s after delete (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, nil, nil) })
}

func TestMirror(t *testing.T) {
	storetest.RunMirror(t, func(t *testing.T) store.Store { return newStore(t, nil, nil) })
}

// TestRoundTripSparse: nil lists and zero values survive (the schema has no
// nullable fields; the store drops the nulls).
func TestRoundTripSparse(t *testing.T) {
	s := newStore(t, nil, nil)
	in := &model.LoadBalancer{UUID: "sparse", Provider: model.ProviderNative,
		Pools: []model.Pool{{ID: "p"}}}
	if err := s.PutSpec(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), "sparse")
	if err != nil {
		t.Fatal(err)
	}
	want := *in
	want.CreatedAt, want.Status = got.CreatedAt, model.Status{State: model.StatePending}
	if specKey(got) != specKey(&want) || !reflect.DeepEqual(got.Status, want.Status) {
		t.Fatalf("round trip:\ngot  %s\nwant %s", fullKey(got), fullKey(&want))
	}
}

// TestCreatedAtFromMetadata: without a creation time from the caller the
// object's own creationTimestamp is CreatedAt, and it stays put across
// updates.
func TestCreatedAtFromMetadata(t *testing.T) {
	s := newStore(t, nil, nil)
	lb := storetest.Sample("m")
	lb.CreatedAt = time.Time{}
	if err := s.PutSpec(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	u, err := s.client.Get(t.Context(), "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasSpecCreatedAt(u) {
		t.Fatal("spec.createdAt written although the caller passed none")
	}
	lb.VIP = "127.10.0.77"
	if err := s.PutSpec(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), "m")
	if err != nil {
		t.Fatal(err)
	}
	if want := u.GetCreationTimestamp().UTC(); !got.CreatedAt.Equal(want) {
		t.Fatalf("CreatedAt = %v, want creationTimestamp %v", got.CreatedAt, want)
	}
}

// TestStrictSchema: the store refuses to write what the CRD would prune, so
// a model field missing from the schema shows up as an error.
func TestStrictSchema(t *testing.T) {
	s := newStore(t, nil, nil)
	if err := s.PutSpec(t.Context(), storetest.Sample("strict")); err != nil {
		t.Fatal(err)
	}
	u, err := s.client.Get(t.Context(), "strict", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"].(map[string]any)["notInTheSchema"] = "x"
	_, err = s.client.Update(t.Context(), u, s.updateOptions())
	if err == nil || !strings.Contains(err.Error(), "notInTheSchema") {
		t.Fatalf("update with an unknown field: err = %v, want a strict-validation error naming it", err)
	}
}

func TestGetInvalidName(t *testing.T) {
	s := newStore(t, nil, nil)
	for _, uuid := range []string{"", "Not_A_Name"} {
		if _, err := s.Get(t.Context(), uuid); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", uuid, err)
		}
	}
}
