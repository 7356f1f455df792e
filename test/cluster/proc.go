//go:build linux

package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"pier.dev/pier/test/kubeapi"
)

// proc is one node daemon (containerd, kubelet) with its output in a log
// file of the node's folder.
type proc struct{ *kubeapi.Process }

// startIn starts bin with args inside the network namespace ns (empty: the
// test's own) and in the host's mount namespace: nsenter --net enters the
// network namespace alone, where `ip netns exec` would also give the
// process a mount namespace of its own, and then containerd would not see
// the volumes the kubelet mounts for it. The kernel's parent-death signal
// (kept across nsenter's exec) ends the daemon if the test binary dies.
func startIn(ns, name, logPath, bin string, args ...string) (*proc, error) {
	argv := append([]string{bin}, args...)
	if ns != "" {
		argv = append([]string{"nsenter", "--net=" + filepath.Join("/run/netns", ns), "--"}, argv...)
	}
	p, err := kubeapi.StartProcess(name, logPath, argv[0], argv[1:]...)
	if err != nil {
		return nil, err
	}
	return &proc{p}, nil
}

// stop sends SIGTERM, then SIGKILL after grace, and returns once the
// process is gone.
func (p *proc) stop(grace time.Duration) {
	if p != nil {
		p.Stop(grace)
	}
}

func (p *proc) exited() bool { return p.Exited() }

// tail is the end of the log, for error messages.
func (p *proc) tail(n int) string {
	return tailFile(p.LogPath(), n)
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return path + ":\n" + strings.Join(lines, "\n")
}
