package kube

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"pier.dev/pier/internal/model"
)

// The custom resource is model.LoadBalancer's own JSON, split in three:
// metadata.name is the UUID, status is Status, and spec is everything else.
// spec.createdAt is present only when the controller passed a creation time
// (the source's, which IPAM settles conflicts by); otherwise CreatedAt is
// metadata.creationTimestamp. These are the model's JSON names for the
// fields that do not go into spec.
const (
	jsonUUID      = "uuid"
	jsonStatus    = "status"
	jsonCreatedAt = "createdAt"
)

// decode turns a LoadBalancer object into the model. An object that has
// never had a status written reads as PENDING: it is, by definition.
func decode(u *unstructured.Unstructured) (*model.LoadBalancer, error) {
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", u.GetName(), err)
	}
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     json.RawMessage   `json:"spec"`
		Status   model.Status      `json:"status"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("decode %s: %w", u.GetName(), err)
	}
	var lb model.LoadBalancer
	if len(o.Spec) > 0 {
		if err := json.Unmarshal(o.Spec, &lb); err != nil {
			return nil, fmt.Errorf("decode %s: spec: %w", u.GetName(), err)
		}
	}
	lb.UUID = o.Metadata.Name
	if lb.CreatedAt.IsZero() {
		lb.CreatedAt = o.Metadata.CreationTimestamp.UTC()
	}
	// The controller may not write status (rbac.yaml), so a placement it
	// changed is applied to the summary here, on every read.
	lb.Status = o.Status.Summarize(lb.Placement)
	return &lb, nil
}

// encodeSpec returns lb's spec in the unstructured form the dynamic client
// sends. withCreatedAt keeps lb.CreatedAt in the spec.
func encodeSpec(lb *model.LoadBalancer, withCreatedAt bool) (map[string]any, error) {
	data, err := json.Marshal(lb)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", lb.UUID, err)
	}
	// apimachinery's decoder, unlike encoding/json's, yields int64 for
	// integers, as everything else in an unstructured object has.
	var spec map[string]any
	if err := utiljson.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("encode %s: %w", lb.UUID, err)
	}
	delete(spec, jsonUUID)
	delete(spec, jsonStatus)
	if !withCreatedAt {
		delete(spec, jsonCreatedAt)
	}
	dropNulls(spec)
	return spec, nil
}

// encodeStatus returns status in unstructured form.
func encodeStatus(status model.Status) (map[string]any, error) {
	data, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	dropNulls(m)
	return m, nil
}

// dropNulls removes the nulls encoding/json writes for nil slices: the
// schema has no nullable fields, and an absent list decodes to nil again.
func dropNulls(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range v {
			dropNulls(e)
		}
	}
}

// specKey is the part of a LoadBalancer PutSpec writes, for comparisons:
// everything but Status.
func specKey(lb *model.LoadBalancer) string {
	c := *lb
	c.Status = model.Status{}
	data, err := json.Marshal(&c)
	if err != nil {
		panic("kube: marshal model: " + err.Error()) // plain data: cannot fail
	}
	return string(data)
}

// fullKey is the whole LoadBalancer, for the watch's change detection.
func fullKey(lb *model.LoadBalancer) string {
	data, err := json.Marshal(lb)
	if err != nil {
		panic("kube: marshal model: " + err.Error())
	}
	return string(data)
}

// hasSpecCreatedAt reports whether the stored object carries its own
// creation time in spec (else CreatedAt is the object's).
func hasSpecCreatedAt(u *unstructured.Unstructured) bool {
	_, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", jsonCreatedAt)
	return found
}
