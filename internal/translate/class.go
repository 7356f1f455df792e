package translate

import (
	networkingv1 "k8s.io/api/networking/v1"
)

const (
	// annotationDefaultClass marks the cluster's default IngressClass.
	annotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
	// annotationLegacyClass is the pre-v1 way to name a class; still
	// honoured, as every major controller does.
	annotationLegacyClass = "kubernetes.io/ingress.class"
)

// classSet is the IngressClasses whose controller is ours.
type classSet struct {
	names map[string]bool
	// defaultOurs: some IngressClass of ours is the cluster default, so
	// class-less Ingresses are ours.
	defaultOurs bool
}

func ourClasses(classes []*networkingv1.IngressClass, opts Options) classSet {
	set := classSet{names: map[string]bool{}}
	for _, c := range classes {
		if c.Spec.Controller != opts.ControllerName {
			continue
		}
		set.names[c.Name] = true
		if c.Annotations[annotationDefaultClass] == "true" {
			set.defaultOurs = true
		}
	}
	return set
}

// owns applies the Ingress v1 class rules: spec.ingressClassName first,
// then the legacy annotation, then the default class.
func (s classSet) owns(ing *networkingv1.Ingress, opts Options) bool {
	if ing.Spec.IngressClassName != nil {
		return s.names[*ing.Spec.IngressClassName]
	}
	if name, ok := ing.Annotations[annotationLegacyClass]; ok {
		return s.names[name]
	}
	return s.defaultOurs || opts.TakeClassless
}
