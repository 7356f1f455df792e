package kube

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"pier.dev/pier/internal/store/storetest"
)

// TestPrinterColumns asks the API server for the table kubectl prints
// (`kubectl get loadbalancers`) and checks its columns and one row.
func TestPrinterColumns(t *testing.T) {
	srv := cluster(t)
	s := newStore(t, nil, nil)
	if err := s.PutSpec(t.Context(), storetest.Sample("table")); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet,
		cfg.Host+"/apis/pier.dev/v1alpha1/loadbalancers/table", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			cols = append(cols, c.Name)
		}
	}
	if got, want := fmt.Sprint(cols), "[Name Provider VIP FIP Active Standby State Master Backup Age]"; got != want {
		t.Fatalf("columns = %s, want %s", got, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	if got, want := fmt.Sprint(table.Rows[0].Cells[:6]), "[table haproxy 127.10.0.1 127.20.0.1 node-a node-b]"; got != want {
		t.Fatalf("row = %s, want %s", got, want)
	}
}
