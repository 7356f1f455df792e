package model_test

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"pier.dev/pier/internal/model"
)

// TestCRDSchemaCoversModel: every JSON field of a LoadBalancer is in the
// custom resource's schema (deploy/crd-loadbalancers.yaml), at the same
// place. pier writes with strict field validation, so a field missing
// there makes the API server refuse every load balancer that sets it
// (listeners[].strictSni was missing and shared TLS groups could not be
// stored). The store contract round-trips samples through a real API
// server; this catches a field no sample sets.
func TestCRDSchemaCoversModel(t *testing.T) {
	b, err := os.ReadFile("../../deploy/crd-loadbalancers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	lb := reflect.TypeFor[model.LoadBalancer]()
	for i := range lb.NumField() {
		f := lb.Field(i)
		name := jsonName(f)
		switch name {
		case "", "uuid": // metadata.name
			continue
		case "status":
			checkSchema(t, "status", f.Type, root.Properties["status"])
			continue
		}
		spec := root.Properties["spec"]
		checkSchema(t, "spec."+name, f.Type, spec.Properties[name])
	}
}

// TestCRDSchemaBoundsRecentErrors: the schema's bounds of a report's
// recent errors are the ones RequestError.Bounded keeps to, so that no
// report an agent makes is refused for a long path.
func TestCRDSchemaBoundsRecentErrors(t *testing.T) {
	b, err := os.ReadFile("../../deploy/crd-loadbalancers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil || len(crd.Spec.Versions) != 1 {
		t.Fatalf("%v, %d versions", err, len(crd.Spec.Versions))
	}
	list := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["nodes"].Items.Properties["recentErrors"]
	if list.MaxItems != model.MaxRecentErrors || list.Items == nil {
		t.Fatalf("recentErrors: maxItems %d, want %d", list.MaxItems, model.MaxRecentErrors)
	}
	for name, max := range map[string]int{"method": model.MaxErrorMethod, "host": model.MaxErrorHost, "path": model.MaxErrorPath,
		"namespace": model.MaxErrorName, "route": model.MaxErrorRoute, "routeKind": model.MaxErrorKind, "service": model.MaxErrorName,
		"servicePort": model.MaxErrorPort, "member": model.MaxErrorMember, "pod": model.MaxErrorName,
		"terminationState": model.MaxErrorTerm, "requestID": model.MaxErrorRequestID} {
		if got := list.Items.Properties[name].MaxLength; got != max {
			t.Errorf("recentErrors[].%s: maxLength %d, want %d", name, got, max)
		}
	}
}

type schema struct {
	Type                 string            `json:"type"`
	MaxLength            int               `json:"maxLength"`
	MaxItems             int               `json:"maxItems"`
	Properties           map[string]schema `json:"properties"`
	Items                *schema           `json:"items"`
	AdditionalProperties *schema           `json:"additionalProperties"`
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

var timeType = reflect.TypeFor[time.Time]()

// checkSchema follows t into s: a struct's fields into properties, a
// slice into items, a map into additionalProperties.
func checkSchema(t *testing.T, path string, typ reflect.Type, s schema) {
	t.Helper()
	if s.Type == "" && s.Properties == nil && s.Items == nil {
		t.Errorf("%s: not in the schema", path)
		return
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == timeType:
		return
	case typ.Kind() == reflect.Struct:
		if s.Properties == nil {
			t.Errorf("%s: a struct, but the schema has no properties (type %q)", path, s.Type)
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Anonymous {
				checkSchema(t, path, f.Type, s)
				continue
			}
			name := jsonName(f)
			if name == "" {
				continue
			}
			checkSchema(t, path+"."+name, f.Type, s.Properties[name])
		}
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() != reflect.Uint8:
		if s.Items == nil {
			t.Errorf("%s: a list, but the schema has no items", path)
			return
		}
		checkSchema(t, path+"[]", typ.Elem(), *s.Items)
	case typ.Kind() == reflect.Map:
		if s.AdditionalProperties == nil {
			t.Errorf("%s: a map, but the schema has no additionalProperties", path)
			return
		}
		checkSchema(t, path+"{}", typ.Elem(), *s.AdditionalProperties)
	}
}
