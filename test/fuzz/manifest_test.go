package fuzz

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/internal/translate"
)

// FuzzTranslateNeverPanics feeds raw bytes to the `pier run -f` source as
// a manifest file, then translates and renders. Whatever the bytes: no
// panic, two runs give identical output (files, errors and problems),
// every problem is printable as it is (checkProblems), and every file
// that renders passes the line property of checkLines.
func FuzzTranslateNeverPanics(f *testing.F) {
	// Small seeds only: the YAML decoder dominates the cost of an exec,
	// and FuzzIngressToConfig already runs the long path and header payloads.
	for _, a := range seedAttacks() {
		if data := manifest(f, &a); len(data) <= 8<<10 {
			f.Add(data)
		}
	}
	for _, s := range handSeeds {
		f.Add([]byte(s))
	}
	// One file, rewritten by every exec: a worker runs inputs one at a
	// time, and a folder per exec costs more than the pipeline.
	path := filepath.Join(f.TempDir(), "in.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		first := pipelineOutput(t, path)
		if second := pipelineOutput(t, path); !bytes.Equal(first, second) {
			t.Fatalf("two runs differ:\n%s\n--- second:\n%s", first, second)
		}
	})
}

// pipelineOutput is everything the pipeline makes of one manifest file,
// as bytes, so that two runs can be compared whole.
func pipelineOutput(t *testing.T, path string) []byte {
	snap, fileProblems, err := files.Load([]string{path})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	opts := translateOptions()
	opts.TakeClassless = true // reach translation without an IngressClass
	res := translate.Ingresses(snap, opts)
	checkProblems(t, res.Problems)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	for _, v := range []any{fileProblems, res.Problems, res.Accepted, res.Ours} {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	rendered := renderAll(res)
	for _, lb := range res.LoadBalancers {
		r := rendered[lb.UUID]
		fmt.Fprintf(&out, "== %s err=%v\n%s\n%s", lb.UUID, r.err, r.cfg, r.crt)
		if r.err == nil {
			checkLines(t, r.cfg)
		}
	}
	return out.Bytes()
}

// manifest writes the attacker's objects as a multi-document YAML file,
// with apiVersion and kind as a user would write them. The victim is left
// out, and the Secret too unless spec.tls needs it, to keep seeds small.
func manifest(tb testing.TB, a *attack) []byte {
	snap := snapshot(tb, a)
	snap.Ingresses = snap.Ingresses[1:]
	snap.Services = snap.Services[1:]
	snap.EndpointSlices = snap.EndpointSlices[1:]
	snap.Secrets = snap.Secrets[1:]
	if a.tlsHost == "" {
		snap.Secrets = nil
	}
	var docs []any
	typed := func(apiVersion, kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
	}
	for _, o := range snap.IngressClasses {
		o := *o
		o.TypeMeta = typed("networking.k8s.io/v1", "IngressClass")
		docs = append(docs, o)
	}
	for _, o := range snap.Ingresses {
		o := *o
		o.TypeMeta = typed("networking.k8s.io/v1", "Ingress")
		docs = append(docs, o)
	}
	for _, o := range snap.Services {
		o := *o
		o.TypeMeta = typed("v1", "Service")
		docs = append(docs, o)
	}
	for _, o := range snap.EndpointSlices {
		o := *o
		o.TypeMeta = typed("discovery.k8s.io/v1", "EndpointSlice")
		docs = append(docs, o)
	}
	for _, o := range snap.Secrets {
		o := *o
		o.TypeMeta = typed("v1", "Secret")
		docs = append(docs, o)
	}
	var out []byte
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			// The YAML emitter refuses some control characters; JSON
			// escapes them, and a JSON document is YAML too.
			if b, err = json.Marshal(d); err != nil {
				tb.Fatal(err)
			}
			b = append(b, '\n')
		}
		out = append(append(out, "---\n"...), b...)
	}
	return out
}

// handSeeds are shapes the typed builder cannot produce: Lists, JSON,
// duplicates, defaults left to the loader, wrong versions, odd scalars.
var handSeeds = []string{
	`apiVersion: v1
kind: List
items:
- apiVersion: networking.k8s.io/v1
  kind: Ingress
  metadata: {name: a, annotations: {pier.dev/load-balancer: g, pier.dev/balance: leastconn}}
  spec:
    defaultBackend: {service: {name: web, port: {number: 80}}}
    rules:
    - host: "*.example.com"
      http: {paths: [{path: /x/, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}]}
- apiVersion: networking.k8s.io/v1
  kind: Ingress
  metadata: {name: b, namespace: other, annotations: {pier.dev/load-balancer: g}}
  spec:
    rules:
    - host: b.example.com
      http: {paths: [{path: /x, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}]}
- apiVersion: v1
  kind: Service
  metadata: {name: web}
  spec: {ports: [{name: http, port: 80}]}
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
  addressType: IPv4
  ports: [{name: http, port: 8080}]
  endpoints: [{addresses: ["10.1.0.1", "10.1.0.2"]}, {addresses: ["10.1.0.3"], conditions: {ready: false, serving: true}}]
`,
	`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"j"},"spec":{"rules":[{"http":{"paths":[{"path":"/","pathType":"ImplementationSpecific","backend":{"service":{"name":"s","port":{"number":1}}}}]}}]}}`,
	"apiVersion: networking.k8s.io/v1beta1\nkind: Ingress\nmetadata: {name: old}\n",
	"apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: a}\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: a}\nspec: {bogus: 1}\n",
	"apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: \"a\\nb\", annotations: {\"pier.dev/x\\n\": \"v\"}}\n",
	"apiVersion: v1\nkind: Secret\nmetadata: {name: t}\ntype: kubernetes.io/tls\nstringData: {tls.crt: x, tls.key: y}\n",
	"\xff\xfe---\n: : :\n",
}
