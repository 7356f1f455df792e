package translate

import (
	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// ingressSettings is an Ingress's annotations as annotation.Parse types
// them, plus what resolving them against the snapshot found: the parsed
// form is pure, and the Secrets it names are read here, in translate.
type ingressSettings struct {
	annotation.Settings
	// basicAuth is auth-type basic's policy once its Secret is read.
	basicAuth *model.BasicAuth
	// upstreamTLS is the pools' proxy-ssl-* once the Secret is read; the
	// default name is filled per pool (applyProtocol).
	upstreamTLS *model.UpstreamTLS
}

// maxAnnotationsSize is the API server's limit on all annotations of an
// object together (256 KiB). A real cluster never hands pier more; from a
// file, more is refused rather than read.
const maxAnnotationsSize = 256 << 10

// annotationsSize returns the size of all annotations and the key of the
// largest value (the first in key order among equals, for determinism).
func annotationsSize(ann map[string]string) (int, string) {
	n, largest := 0, ""
	for k, v := range ann {
		n += len(k) + len(v)
		if l := len(ann[largest]); len(v) > l || (len(v) == l && (largest == "" || k < largest)) {
			largest = k
		}
	}
	return n, largest
}

// checks is whether the Ingress's pools check their members: its
// pier.dev/health-check when set, else the operator's default.
func (s ingressSettings) checks(opts Options) bool {
	if s.HealthCheck != nil {
		return *s.HealthCheck
	}
	return opts.HealthChecks
}
