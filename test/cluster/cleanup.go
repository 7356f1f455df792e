//go:build linux

package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"pier.dev/pier/internal/lab"
)

// ownerFile, in a cluster's folder, holds the pid of the test binary that
// made it: Start sweeps the folders of dead owners.
const ownerFile = "pier-cluster.pid"

// Where the kubelet and containerd put things outside their own folders.
const (
	// containerLogLinks: the kubelet links every container's log here
	// (fixed in the kubelet, whatever podLogsDir says).
	containerLogLinks = "/var/log/containers"
	// shimSockets: containerd 1.6 names each shim's socket after a hash
	// of its own address, in this fixed folder.
	shimSockets = "/run/containerd/s"
	// devicePlugins: the kubelet's device manager serves kubelet.sock
	// here, a path fixed in the kubelet (so the second kubelet's replaces
	// the first's; no test uses device plugins).
	devicePlugins = "/var/lib/kubelet/device-plugins"
)

// scrub ends every process of the cluster whose folder is dir and whose
// nodes are nodes (network namespaces), unmounts everything below dir,
// removes the containers' cgroups, the links and sockets left outside
// dir, and dir itself. It is used by Stop and for the leftovers of a
// killed run, so it assumes nothing is in order.
func scrub(dir string, nodes []string) []error {
	var errs []error
	ids := containerIDs(dir)
	// Twice: a shim killed in the first pass may have been about to
	// start a process that the second pass finds.
	for range 2 {
		killAll(dir, nodes, ids)
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(ids); err != nil {
		errs = append(errs, err)
	}
	removeLogLinks(dir)
	removeDeadSockets(shimSockets)
	removeDeadSockets(devicePlugins)
	// Folders made for the fixed paths above, removed only when empty.
	for _, d := range []string{containerLogLinks, devicePlugins, filepath.Dir(devicePlugins), shimSockets, filepath.Dir(shimSockets)} {
		_ = syscall.Rmdir(d)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
	}
	return errs
}

// killAll sends SIGKILL to every process inside the nodes' network
// namespaces (containerd, its shims, host-network containers), inside a
// pod network namespace that containerd mounted below dir
// (netns_mounts_under_state_dir), or in the cgroup of one of the
// containers ids (every container), and waits up to 2 s for them to go.
func killAll(dir string, nodes []string, ids map[string]bool) {
	for _, n := range nodes {
		lab.KillIn(n)
	}
	netns := map[[2]uint64]bool{}
	for _, m := range mountsUnder(dir) {
		if m.fstype != "nsfs" {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(m.point, &st) == nil {
			netns[[2]uint64{st.Dev, st.Ino}] = true
		}
	}
	match := func(pid int) bool {
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && netns[[2]uint64{st.Dev, st.Ino}] {
			return true
		}
		return inCgroupOf(pid, ids)
	}
	var pids []int
	for _, pid := range allPids() {
		if match(pid) {
			pids = append(pids, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil && !zombie(pid) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// allPids lists /proc, this process excepted.
func allPids() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "pid (comm) S …": the state follows the last parenthesis.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// cgroupParent is where containerd puts a container's cgroup when the
// kubelet names no parent (cgroupsPerQOS false): /k8s.io/<ID>, after the
// CRI's containerd namespace, in every hierarchy.
const cgroupParent = "k8s.io"

// containerIDs lists the containers (pod sandboxes included) that the
// containerds below dir ran: their task folders in each node's state.
func containerIDs(dir string) map[string]bool {
	ids := map[string]bool{}
	tasks, _ := filepath.Glob(filepath.Join(dir, "*", "state", "io.containerd.runtime.v2.task", "k8s.io", "*"))
	for _, t := range tasks {
		ids[filepath.Base(t)] = true
	}
	return ids
}

// inCgroupOf reports whether pid is in the cgroup of one of the
// containers ids (or below it).
func inCgroupOf(pid int, ids map[string]bool) bool {
	if len(ids) == 0 {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		// "4:memory:/k8s.io/0123…": the path is after the second colon.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		rest, ok := strings.CutPrefix(parts[2], "/"+cgroupParent+"/")
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(rest, "/")
		if ids[id] {
			return true
		}
	}
	return false
}

type mount struct{ point, fstype string }

// mountsUnder lists the mounts at or below dir in this mount namespace,
// from /proc/self/mountinfo.
func mountsUnder(dir string) []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /root /mnt rw,noatime master:1 - ext3 /dev/root rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, rest := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(rest) < 1 {
			continue
		}
		point := unescapeMount(fields[4])
		if point == dir || strings.HasPrefix(point, dir+"/") {
			out = append(out, mount{point: point, fstype: rest[0]})
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount below dir, deepest first, until none
// is left: tmpfs of secret and projected volumes, containers' overlay
// root filesystems, sandboxes' /dev/shm, pod network namespaces.
func unmountUnder(dir string) error {
	var last []mount
	for range 5 {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			return nil
		}
		last = mounts
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].point) > len(mounts[j].point) })
		for _, m := range mounts {
			_ = syscall.Unmount(m.point, syscall.MNT_DETACH)
		}
	}
	return fmt.Errorf("mounts left below %s: %v", dir, last)
}

// removeCgroups removes the cgroups of the containers ids in every
// hierarchy (v1 controllers and the v2 mount), deepest first, and
// /k8s.io itself once empty. Runc removes a container's own when the
// container is deleted; these are what killed containers leave.
func removeCgroups(ids map[string]bool) error {
	var roots []string
	for id := range ids {
		more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cgroupParent, id))
		roots = append(roots, more...)
	}
	defer func() {
		parents, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cgroupParent))
		for _, p := range parents {
			_ = syscall.Rmdir(p) // fails while another container's cgroup is in it
		}
	}()
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeLogLinks deletes the links in /var/log/containers that point
// below dir.
func removeLogLinks(dir string) {
	entries, _ := os.ReadDir(containerLogLinks)
	for _, e := range entries {
		p := filepath.Join(containerLogLinks, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			os.Remove(p)
		}
	}
}

// removeDeadSockets deletes the Unix sockets in dir that nobody serves
// (connection refused): the sockets of shims that were killed. A served
// socket, such as another containerd's shim's, stays.
func removeDeadSockets(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		c, err := net.DialTimeout("unix", p, 200*time.Millisecond)
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			os.Remove(p)
		}
	}
}

// sweep removes what killed runs left: every /tmp/pc-* folder whose owner
// is gone, and then, unless a live run holds them, the lab's namespaces
// and the nodes' cgroups. It returns an error when a live run holds the
// names this one needs.
func sweep(opts lab.Options, nodes []string) error {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	var live []string
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not a cluster's, or being made right now
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			continue
		}
		if pid != os.Getpid() && syscall.Kill(pid, 0) != syscall.ESRCH {
			live = append(live, fmt.Sprintf("%s (pid %d)", dir, pid))
			continue
		}
		scrub(dir, nodes)
	}
	if len(live) > 0 {
		return fmt.Errorf("another cluster run is live: %s; the lab's names (%s*) are fixed, so one run at a time",
			strings.Join(live, ", "), opts.Prefix)
	}
	if l, err := lab.Attach(opts); err == nil {
		// Kills what runs in them and deletes those that exist.
		l.Remove()
	}
	return nil
}
