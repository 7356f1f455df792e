package kubemode

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var lbResource = schema.GroupVersionResource{Group: "pier.dev", Version: "v1alpha1", Resource: "loadbalancers"}

// lbObject is the LoadBalancer custom resource as the API returns it.
type lbObject struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Name      string `json:"name"`
		Provider  string `json:"provider"`
		VIP       string `json:"vip"`
		FIP       string `json:"fip"`
		Placement struct {
			Active         string `json:"active"`
			Standby        string `json:"standby"`
			RouterID       int    `json:"routerId"`
			ActiveAddress  string `json:"activeAddress"`
			StandbyAddress string `json:"standbyAddress"`
		} `json:"placement"`
		Sources []struct {
			Kind      string `json:"kind"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			UID       string `json:"uid"`
		} `json:"sources"`
	} `json:"spec"`
	Status struct {
		State    string `json:"state"`
		SpecHash string `json:"specHash"`
		Node     string `json:"node"`
		Message  string `json:"message"`
	} `json:"status"`
}

func (e *env) loadBalancers() []lbObject {
	e.t.Helper()
	list, err := e.dyn.Resource(lbResource).List(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("list load balancers: %v", err)
	}
	var out []lbObject
	for _, u := range list.Items {
		data, _ := u.MarshalJSON()
		var lb lbObject
		if err := json.Unmarshal(data, &lb); err != nil {
			e.t.Fatalf("decode load balancer %s: %v", u.GetName(), err)
		}
		out = append(out, lb)
	}
	return out
}

// lbOf returns the LoadBalancer whose sources name Ingress ns/name.
func (e *env) lbOf(name string) (lbObject, bool) {
	for _, lb := range e.loadBalancers() {
		for _, s := range lb.Spec.Sources {
			if s.Kind == "Ingress" && s.Namespace == e.ns && s.Name == name {
				return lb, true
			}
		}
	}
	return lbObject{}, false
}

// ingress is an Ingress of our class routing host to the echo Service.
func (e *env) ingress(name, host string, annotations map[string]string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	class := className
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: annotations},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: echoSvc, Port: networkingv1.ServiceBackendPort{Number: echoPort},
						}},
					}},
				}},
			}},
		},
	}
}

func (e *env) create(ing *networkingv1.Ingress) *networkingv1.Ingress {
	e.t.Helper()
	out, err := e.cs.NetworkingV1().Ingresses(e.ns).Create(e.t.Context(), ing, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create Ingress %s: %v", ing.Name, err)
	}
	return out
}

func (e *env) getIngress(name string) *networkingv1.Ingress {
	e.t.Helper()
	ing, err := e.cs.NetworkingV1().Ingresses(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get Ingress %s: %v", name, err)
	}
	return ing
}

// published renders status.loadBalancer.ingress as "a,b".
func published(ing *networkingv1.Ingress) string {
	var parts []string
	for _, a := range ing.Status.LoadBalancer.Ingress {
		parts = append(parts, a.IP+a.Hostname)
	}
	return strings.Join(parts, ",")
}

// waitPublished waits until Ingress name publishes anything and returns it.
func (e *env) waitPublished(name string, d time.Duration) string {
	e.t.Helper()
	var got string
	eventually(e.t, d, "Ingress "+name+" publishes an address", func() error {
		if got = published(e.getIngress(name)); got == "" {
			return fmt.Errorf("no address")
		}
		return nil
	})
	return got
}

// waitStatus waits until Ingress name publishes exactly want.
func (e *env) waitStatus(name, want string, d time.Duration) {
	e.t.Helper()
	eventually(e.t, d, "Ingress "+name+" publishes "+want, func() error {
		if got := published(e.getIngress(name)); got != want {
			return fmt.Errorf("publishes %q", got)
		}
		return nil
	})
}

// events returns the Events of Ingress name with the given reason.
func (e *env) events(name, reason string) []corev1.Event {
	e.t.Helper()
	list, err := e.cs.CoreV1().Events(e.ns).List(e.t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Ingress,involvedObject.name=" + name,
	})
	if err != nil {
		e.t.Fatalf("list events: %v", err)
	}
	return slices.DeleteFunc(list.Items, func(ev corev1.Event) bool { return ev.Reason != reason })
}

// waitEvent waits for a Warning Event with reason on Ingress name.
func (e *env) waitEvent(name, reason string, d time.Duration) corev1.Event {
	e.t.Helper()
	var ev corev1.Event
	eventually(e.t, d, "Event "+reason+" on Ingress "+name, func() error {
		evs := e.events(name, reason)
		if len(evs) == 0 {
			return fmt.Errorf("none")
		}
		ev = evs[0]
		return nil
	})
	if ev.Type != corev1.EventTypeWarning {
		e.t.Errorf("Event %s on %s has type %s, want Warning", reason, name, ev.Type)
	}
	return ev
}
