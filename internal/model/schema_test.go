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

type schema struct {
	Type                 string            `json:"type"`
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
