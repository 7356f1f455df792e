package translate

import (
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/source"
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

// ClassUse counts the IngressClasses of snap whose controller is pier's
// and the Ingresses that name no class at all (neither
// spec.ingressClassName nor the legacy annotation): what a log needs to
// say why no Ingress is pier's.
func ClassUse(snap *source.Snapshot, opts Options) (classes, classless int) {
	classes = len(ourClasses(snap.IngressClasses, opts).names)
	for _, ing := range snap.Ingresses {
		if _, named := ing.Annotations[annotationLegacyClass]; ing.Spec.IngressClassName == nil && !named {
			classless++
		}
	}
	return classes, classless
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
