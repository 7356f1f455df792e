package haproxydriver

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// writeUpstreamFiles writes the CA bundle and client certificate of each
// pool's UpstreamTLS (proxy-ssl-secret) into the certs folder, as
// writeCertificates does for listeners: read from the Secret again,
// validated and re-encoded, served only while they hash to what
// translation accepted. They are named by digest, so a new one never
// replaces what the last good configuration reads, and the fragment that
// names them is checked with them (`haproxy -c`) before it is loaded.
func (d *Driver) writeUpstreamFiles(lb *model.LoadBalancer, at layout.LB) (changed bool, err error) {
	for _, p := range lb.Pools {
		u := p.UpstreamTLS
		if u == nil || (u.CASHA256 == "" && u.ClientSHA256 == "") {
			continue
		}
		wrote, err := d.writeUpstream(at, u)
		if err != nil && u.Secret == "" { // a BackendTLSPolicy's bundle, from the model
			return changed, fmt.Errorf("pool %s: CA bundle: %w", p.Name, err)
		}
		if err != nil {
			return changed, fmt.Errorf("pool %s: secret %s/%s: %w", p.Name, u.Namespace, u.Secret, err)
		}
		changed = changed || wrote
	}
	return changed, nil
}

func (d *Driver) writeUpstream(at layout.LB, u *model.UpstreamTLS) (bool, error) {
	var data map[string][]byte
	if u.Secret != "" {
		var err error
		if data, err = d.cfg.Secrets.Data(u.Namespace, u.Secret); err != nil {
			return false, err
		}
	}
	caPEM := data["ca.crt"]
	if u.CAPEM != "" { // a BackendTLSPolicy's, from its ConfigMaps
		caPEM = []byte(u.CAPEM)
	}
	changed := false
	if u.CASHA256 != "" {
		ca, err := tlscert.ParseCA(caPEM)
		if err != nil {
			return false, fmt.Errorf("ca.crt: %w", err)
		}
		if ca.SHA256 != u.CASHA256 {
			return false, errors.New("ca.crt changed since it was translated; waiting for the next update")
		}
		path, err := at.UpstreamCA(ca.SHA256)
		if err != nil {
			return false, err
		}
		if changed, err = writeNew(path, ca.PEM); err != nil {
			return false, err
		}
	}
	if u.ClientSHA256 != "" {
		pair, err := tlscert.Parse(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return false, fmt.Errorf("client certificate: %w", err)
		}
		if pair.SHA256 != u.ClientSHA256 {
			return false, errors.New("client certificate changed since it was translated; waiting for the next update")
		}
		path, err := at.UpstreamClient(pair.SHA256)
		if err != nil {
			return false, err
		}
		wrote, err := writeNew(path, pair.Combined())
		if err != nil {
			return false, err
		}
		changed = changed || wrote
	}
	return changed, nil
}

// writeNew writes data to path (mode 0600) unless it holds it already.
func writeNew(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := writeIfChanged(path, data, 0o600); err != nil {
		return false, err
	}
	return true, nil
}

// upstreamPaths are the files of the pools' UpstreamTLS, which
// pruneTLSFiles keeps.
func upstreamPaths(at layout.LB, lb *model.LoadBalancer) []string {
	var out []string
	for _, p := range lb.Pools {
		if u := p.UpstreamTLS; u != nil {
			if path, err := at.UpstreamCA(u.CASHA256); err == nil && u.CASHA256 != "" {
				out = append(out, path)
			}
			if path, err := at.UpstreamClient(u.ClientSHA256); err == nil && u.ClientSHA256 != "" {
				out = append(out, path)
			}
		}
	}
	return out
}
