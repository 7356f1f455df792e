//go:build linux

package cluster

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// ContainerPids lists the processes of a container, found through its
// cgroup (every hierarchy names the container's ID as the last folder of
// the path), the first being the container's init (the lowest pid). id is
// a ContainerStatus's containerID, with or without "containerd://".
func ContainerPids(id string) []int {
	_, id, _ = strings.Cut(id, "://")
	if id == "" {
		return nil
	}
	var out []int
	for _, pid := range allPids() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.HasSuffix(line, "/"+id) {
				out = append(out, pid)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// PodContainerPids lists the processes of the pod's container named
// container (its first when container is ""), through ContainerPids.
func PodContainerPids(pod *corev1.Pod, container string) ([]int, error) {
	for _, st := range pod.Status.ContainerStatuses {
		if container != "" && st.Name != container {
			continue
		}
		if st.ContainerID == "" {
			return nil, fmt.Errorf("pod %s/%s: container %s has not started", pod.Namespace, pod.Name, st.Name)
		}
		pids := ContainerPids(st.ContainerID)
		if len(pids) == 0 {
			return nil, fmt.Errorf("pod %s/%s: no process in container %s (%s)", pod.Namespace, pod.Name, st.Name, st.ContainerID)
		}
		return pids, nil
	}
	return nil, fmt.Errorf("pod %s/%s: no container %q in its status", pod.Namespace, pod.Name, container)
}

// ProcessesNamed returns the pids among pids whose /proc/PID/comm is comm
// (as "haproxy"): the processes of one program inside a container.
func ProcessesNamed(pids []int, comm string) []int {
	var out []int
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			out = append(out, pid)
		}
	}
	return out
}

// SameNetns reports whether process pid is in the network namespace at
// path (/run/netns/NAME or /proc/PID/ns/net).
func SameNetns(pid int, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &a); err != nil {
		return false, err
	}
	if err := unix.Stat(path, &b); err != nil {
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// InNetnsOf runs f on an OS thread moved into the network namespace of
// process pid (a pod's), and moves it back. Sockets made inside stay in
// that namespace. Like internal/netnsdo, which takes names in /run/netns;
// containerd's pod namespaces are not there.
func InNetnsOf(pid int, f func() error) error {
	target, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return err
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter the network namespace of pid %d: %w", pid, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// Stuck in the other namespace: the thread stays locked and
		// exits with this goroutine.
		return fmt.Errorf("leave the network namespace of pid %d: %w", pid, err)
	}
	runtime.UnlockOSThread()
	return ferr
}
