package web

import (
	"bytes"
	"fmt"
	"os"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
)

// ConfigOnDisk shows the haproxy.conf fragment the agent wrote under
// stateDir: what HAProxy runs, member slots included (pier run, where the
// agent shares the process).
func ConfigOnDisk(stateDir string) func(*model.LoadBalancer) ([]byte, error) {
	return func(lb *model.LoadBalancer) ([]byte, error) {
		at, err := folderOf(stateDir, lb)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(at.Config())
		if err != nil {
			return nil, fmt.Errorf("not written on this node yet: %w", err)
		}
		return redactPasswords(b), nil
	}
}

// userLine starts a userlist's user lines in a fragment (render writes
// nothing else with it).
var userLine = []byte("    user ")

// redactPasswords hides the password hashes of basic-auth userlists: the
// page shows no Secret's content, hashes included (they can be cracked
// offline).
func redactPasswords(conf []byte) []byte {
	lines := bytes.SplitAfter(conf, []byte("\n"))
	for i, l := range lines {
		if !bytes.HasPrefix(l, userLine) {
			continue
		}
		if at := bytes.Index(l, []byte(" password ")); at >= 0 {
			lines[i] = append(append([]byte{}, l[:at]...), " password <redacted>\n"...)
		}
	}
	return bytes.Join(lines, nil)
}

// ConfigFromSpec renders the fragment from the stored spec, as an agent
// with state folder stateDir and options opts would (the controller, which
// runs no HAProxy). Server slots are shown in spec order: an agent keeps
// members in the slots they had, so its file may order them differently.
func ConfigFromSpec(stateDir string, opts render.Options) func(*model.LoadBalancer) ([]byte, error) {
	return func(lb *model.LoadBalancer) ([]byte, error) {
		at, err := folderOf(stateDir, lb)
		if err != nil {
			return nil, err
		}
		r, err := render.Render(haproxyListeners(lb), at, nil, opts)
		if err != nil {
			return nil, err
		}
		return r.Fragment, nil
	}
}

// haproxyListeners is lb without its UDP listeners and their pools: a
// Gateway's, which nftables serves beside HAProxy (agent/splitdriver,
// whose Parts the agent applies), have no fragment.
func haproxyListeners(lb *model.LoadBalancer) *model.LoadBalancer {
	out := *lb
	out.Listeners, out.Pools = nil, nil
	udpPools := map[string]bool{}
	for _, l := range lb.Listeners {
		if l.Protocol == model.ProtocolUDP {
			udpPools[l.DefaultPoolID] = true
		} else {
			out.Listeners = append(out.Listeners, l)
		}
	}
	for _, p := range lb.Pools {
		if !udpPools[p.ID] {
			out.Pools = append(out.Pools, p)
		}
	}
	return &out
}

func folderOf(stateDir string, lb *model.LoadBalancer) (layout.LB, error) {
	l, err := layout.New(stateDir)
	if err != nil {
		return layout.LB{}, err
	}
	return l.LB(lb.UUID)
}
