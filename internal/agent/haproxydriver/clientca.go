package haproxydriver

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// ConfigMaps gives the driver the CA bundles a listener's client
// validation references (model.ClientValidation): CA certificates are
// not secret, but like key material they are not copied into the
// LoadBalancer, which would grow with every bundle.
type ConfigMaps interface {
	// ConfigMapData returns the data of ConfigMap namespace/name.
	ConfigMapData(namespace, name string) (map[string]string, error)
}

// writeClientCAs writes each listener's client CA bundle into the certs
// folder, as writeCertificates does certificates: read from its
// ConfigMaps again, joined and re-encoded, served only while it hashes
// to what translation accepted. Named by digest, so a new one never
// replaces what the last good configuration reads.
func (d *Driver) writeClientCAs(lb *model.LoadBalancer, at layout.LB) (changed bool, err error) {
	for _, l := range lb.Listeners {
		cv := l.ClientValidation
		if cv == nil {
			continue
		}
		wrote, err := d.writeClientCA(at, cv)
		if err != nil {
			return changed, fmt.Errorf("listener %d: client CA: %w", l.Port, err)
		}
		changed = changed || wrote
	}
	return changed, nil
}

func (d *Driver) writeClientCA(at layout.LB, cv *model.ClientValidation) (bool, error) {
	if d.cfg.ConfigMaps == nil {
		return false, errors.New("this agent reads no ConfigMaps")
	}
	parts := make([][]byte, 0, len(cv.CAs))
	for _, ref := range cv.CAs {
		data, err := d.cfg.ConfigMaps.ConfigMapData(ref.Namespace, ref.Name)
		if err != nil {
			return false, fmt.Errorf("config map %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		ca, err := tlscert.ParseCA([]byte(data["ca.crt"]))
		if err != nil {
			return false, fmt.Errorf("config map %s/%s: ca.crt: %w", ref.Namespace, ref.Name, err)
		}
		parts = append(parts, ca.PEM)
	}
	bundle, err := tlscert.JoinCA(parts...)
	if err != nil {
		return false, err
	}
	if bundle.SHA256 != cv.SHA256 {
		return false, errors.New("changed since it was translated; waiting for the next update")
	}
	path, err := at.ClientCA(bundle.SHA256)
	if err != nil {
		return false, err
	}
	return writeNew(path, bundle.PEM)
}

// clientCAPaths are the files of the listeners' client validation, which
// pruneTLSFiles keeps.
func clientCAPaths(at layout.LB, lb *model.LoadBalancer) []string {
	var out []string
	for _, l := range lb.Listeners {
		if cv := l.ClientValidation; cv != nil {
			if path, err := at.ClientCA(cv.SHA256); err == nil {
				out = append(out, path)
			}
		}
	}
	return out
}
