package haproxydriver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"pier.dev/pier/internal/fsutil"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/htpasswd"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// writeFiles writes the crt-list, the routing maps, the slot record and
// the fragment (to fragment: the load balancer's Config or Candidate).
// HAProxy never reads the fragment directly: the process package copies
// it, checks the copy with `haproxy -c` and only then loads it, so a file
// HAProxy would refuse is never where a restart picks it up. The crt-list and certificates, which the fragment names by path,
// are named by their digest (package layout): a new one never replaces
// what the last good configuration reads. The slot record goes with the
// fragment it describes, so a new agent renders the same bytes and an
// adopted HAProxy is not reloaded.
func writeFiles(at layout.LB, fragment string, r *render.Result) error {
	slots, err := json.Marshal(r.Slots)
	if err != nil {
		return fmt.Errorf("slot record: %w", err)
	}
	if r.CrtList != nil {
		if err := writeIfChanged(r.CrtListPath, r.CrtList, 0o600); err != nil {
			return err
		}
	}
	for _, m := range r.Maps {
		if err := writeIfChanged(m.Path, m.Data, 0o600); err != nil {
			return err
		}
	}
	if r.AuthLua != nil {
		if err := writeIfChanged(r.AuthLuaPath, r.AuthLua, 0o600); err != nil {
			return err
		}
	}
	if err := writeIfChanged(at.Slots(), slots, 0o600); err != nil {
		return err
	}
	return writeIfChanged(fragment, r.Fragment, 0o600)
}

// writeLB writes the load balancer's files. When its process packs other
// load balancers, the fragment goes to Candidate: commit installs it in
// the process's list when it loads it, and checks it alone only if HAProxy
// refuses a load of several, so the list never keeps a fragment HAProxy
// refuses.
func (d *Driver) writeLB(at layout.LB, r *render.Result) error {
	if !d.packs() {
		return writeFiles(at, at.Config(), r)
	}
	return writeFiles(at, at.Candidate(), r)
}

// writeProcessFiles writes global.conf and the process's process.conf.
func (d *Driver) writeProcessFiles(p layout.Process) error {
	global, err := render.Global(d.cfg.Render)
	if err != nil {
		return err
	}
	d.mu.Lock()
	draining := d.draining
	d.mu.Unlock()
	proc, err := render.ProcessConf(p, draining)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", p.Dir, err)
	}
	if err := writeIfChanged(p.Global, global, 0o600); err != nil {
		return err
	}
	return writeIfChanged(p.Conf(), proc, 0o600)
}

// readSlots reads the slot record a previous agent left; none is no
// history.
func readSlots(at layout.LB) (render.Slots, error) {
	b, err := os.ReadFile(at.Slots())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s render.Slots
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", at.Slots(), err)
	}
	return s, nil
}

// writeCertificates fetches each certificate's Secret, validates it again
// (the store may be older than the Secret), checks it is the version that
// translation accepted, and writes the canonical PEM with mode 0600.
func (d *Driver) writeCertificates(lb *model.LoadBalancer, at layout.LB) (changed bool, err error) {
	if err := os.MkdirAll(at.CertsDir(), 0o700); err != nil {
		return false, fmt.Errorf("create %s: %w", at.CertsDir(), err)
	}
	for _, l := range lb.Listeners {
		for _, c := range l.AllCertificates() {
			wrote, err := d.writeCertificate(at, c)
			if err != nil {
				return changed, fmt.Errorf("certificate %s/%s: %w", c.Namespace, c.Secret, err)
			}
			changed = changed || wrote
		}
	}
	return changed, nil
}

func (d *Driver) writeCertificate(at layout.LB, c model.Certificate) (bool, error) {
	certPEM, keyPEM, err := d.cfg.Secrets.TLSPair(c.Namespace, c.Secret)
	if err != nil {
		return false, err
	}
	pair, err := tlscert.Parse(certPEM, keyPEM)
	if err != nil {
		return false, err
	}
	if pair.SHA256 != c.SHA256 {
		return false, errors.New("changed since it was translated; waiting for the next update")
	}
	path, err := at.Cert(c.ID, c.SHA256)
	if err != nil {
		return false, err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, pair.Combined()) {
		return false, nil
	}
	if err := tlscert.WriteFile(path, pair); err != nil {
		return false, fmt.Errorf("write: %w", err)
	}
	return true, nil
}

// authUsers fetches the Secret of a policy's basic auth, reads it again
// (the store may be older than the Secret) and returns its users only
// when they are the ones translation accepted, as writeCertificate does.
func (d *Driver) authUsers(a model.BasicAuth) ([]htpasswd.User, error) {
	data, err := d.cfg.Secrets.Data(a.Namespace, a.Secret)
	if err != nil {
		return nil, err
	}
	users, err := htpasswd.FromSecret(data, a.Type)
	if err != nil {
		return nil, err
	}
	if htpasswd.Digest(users) != a.SHA256 {
		return nil, errors.New("changed since it was translated; waiting for the next update")
	}
	return users, nil
}

// pruneTLSFiles removes the crt-lists, certificate files, routing maps and
// auth Lua files that r does not read. Call it only once r's configuration has loaded (or been
// restaged as the last good one): until then the previous files are what
// a restart needs. It also removes private keys whose TLS entry is gone.
func pruneTLSFiles(at layout.LB, lb *model.LoadBalancer, r *render.Result) error {
	keep := map[string]bool{}
	if r.CrtListPath != "" {
		keep[r.CrtListPath] = true
	}
	for _, l := range lb.Listeners {
		for _, c := range l.AllCertificates() {
			if p, err := at.Cert(c.ID, c.SHA256); err == nil {
				keep[p] = true
			}
		}
	}
	for _, m := range r.Maps {
		keep[m.Path] = true
	}
	for _, p := range upstreamPaths(at, lb) {
		keep[p] = true
	}
	for _, p := range clientCAPaths(at, lb) {
		keep[p] = true
	}
	if r.AuthLuaPath != "" {
		keep[r.AuthLuaPath] = true
	}
	lists, err := filepath.Glob(filepath.Join(at.Dir, "crt-list*"))
	if err != nil {
		return err
	}
	maps, err := filepath.Glob(filepath.Join(at.Dir, layout.RouteMapPrefix+"*.map"))
	if err != nil {
		return err
	}
	lua, err := filepath.Glob(filepath.Join(at.Dir, layout.AuthLuaPrefix+"*.lua"))
	if err != nil {
		return err
	}
	authMaps, err := filepath.Glob(filepath.Join(at.Dir, layout.AuthLuaPrefix+"*.map"))
	if err != nil {
		return err
	}
	lists = append(append(append(lists, maps...), lua...), authMaps...)
	certs, err := filepath.Glob(filepath.Join(at.CertsDir(), "*.pem"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range append(lists, certs...) {
		if !keep[p] {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// certificateDigests lists the content hashes of every certificate.
func certificateDigests(lb *model.LoadBalancer) []byte {
	var out []byte
	for _, l := range lb.Listeners {
		for _, c := range l.AllCertificates() {
			out = append(out, "\n# cert "+c.ID+" "+c.SHA256...)
		}
	}
	return out
}

// writeIfChanged replaces path with data (fsutil.WriteAtomic) unless it
// holds that already.
func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return fsutil.WriteAtomic(path, data, mode)
}

func hashOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
