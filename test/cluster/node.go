//go:build linux

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"pier.dev/pier/internal/lab"
)

// Node is one kubelet node: a lab host whose network namespace holds its
// containerd and kubelet (and every host-network pod).
type Node struct {
	// Name is the Node object's name and the network namespace's (pcn0).
	Name string
	Host *lab.Host
	// Addr is the node's InternalIP, on the lab's segment.
	Addr netip.Addr
	// PodCIDR is the node's pod range (the CNI bridge's host-local IPAM).
	PodCIDR netip.Prefix
	// Dir holds the node's state: containerd's root and state, the
	// kubelet's root, configs and logs (containerd.log, kubelet.log).
	Dir string
	// Socket is containerd's gRPC socket (for ctr --address).
	Socket string

	containerd *proc
	kubelet    *proc
}

// Paths below Node.Dir. Short names: containerd's socket path and the
// sockets under its state folder must fit in 107 bytes.
func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.Dir}, elem...)...) }

// pauseRef is the name every node's containerd knows the pause image by
// (sandbox_image): the imported archive is tagged with it, whatever name
// its index gives.
const pauseRef = "pier.test/pause:cluster"

// containerdConfig is the node's whole containerd configuration: every
// path is below the node's folder, so that two containerds on one machine
// share nothing and the clean-up finds everything.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Dir}}/root"
state = "{{.Dir}}/state"
# Temporary mounts while unpacking layers.
temp = "{{.Dir}}/tmp"
# The OOM score cannot be lowered by root inside this container; 0 leaves it.
oom_score = 0

[grpc]
  address = "{{.Socket}}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  # The pause image is imported before the kubelet starts; nothing is ever
  # pulled (the node's namespace has no route out).
  sandbox_image = "{{.Pause}}"
  # Without it every sandbox fails here with runc's "can't get final
  # child's PID from pipe": root in this container may not lower
  # oom_score_adj, and the CRI asks for -998 for the pause container.
  restrict_oom_score_adj = true
  # Pod network namespaces under the state folder, not /run/netns: the
  # clean-up finds (and unmounts) them there, and they stay out of
  # ip netns list.
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    # Debian's containernetworking-plugins.
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{.Dir}}/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc's state below the node's folder (default /run/containerd/runc).
        Root = "{{.Dir}}/runc"
        # cgroupfs, as the kubelet's cgroupDriver.
        SystemdCgroup = false
`))

// kubeletConfig is the node's KubeletConfiguration; each setting says why
// this machine (or this harness) needs it.
var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroups v1 (v2 only as a side mount): 1.34 refuses v1
# unless told not to.
failCgroupV1: false
# No systemd here; containerd's runc uses cgroupfs too.
cgroupDriver: cgroupfs
# No QoS or pod cgroup tree: the kubelet would manage the machine's cgroup
# roots, shared with the other node and everything else. The kubelet then
# gives no cgroup parent (cgroupRoot is ignored) and containerd puts each
# container in /k8s.io/<container ID> of every hierarchy; the clean-up
# finds them by the IDs in the node's state folder.
cgroupsPerQOS: false
# Nothing to enforce without the QoS tree (and it needs cgroupsPerQOS).
enforceNodeAllocatable: []
# The machine may have swap; tests do not care.
failSwapOn: false
containerRuntimeEndpoint: unix://{{.Socket}}
# Images are imported, never pulled: image GC must never delete one (the
# disk is shared and its usage says nothing about this node).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# No eviction: memory and disk figures are the whole machine's, which the
# other node and other tests share.
evictionHard:
  memory.available: "0%"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
evictionPressureTransitionPeriod: 0s
# Container logs below the node's folder (default /var/log/pods).
podLogsDir: {{.Dir}}/logs
# Flex volume plugins: none, but the kubelet makes the folder (default
# /usr/libexec/kubernetes/kubelet-plugins/volume/exec).
volumePluginDir: {{.Dir}}/volume-plugins
# Static client certificate; no CSR, no rotation (no signer runs).
rotateCertificates: false
serverTLSBootstrap: false
# The API server does not call the kubelet (no --kubelet-client-*), but
# its API stays authenticated: client certificates from the cluster's CA.
address: {{.Addr}}
readOnlyPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {{.Dir}}/ca.crt
authorization:
  mode: Webhook
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# Faster status for tests: Ready within seconds, NotReady noticed sooner.
nodeStatusUpdateFrequency: 4s
nodeStatusReportFrequency: 10s
syncFrequency: 10s
# No cluster DNS: pods get the machine's resolv.conf (nothing resolves
# from the lab anyway).
resolvConf: ""
# Graceful node shutdown needs systemd-logind.
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
`))

// cniConfig is the node's pod network: a bridge cni0 in the node's
// namespace, acting as the pods' gateway, with host-local addresses from
// the node's pod CIDR. No masquerade: pods keep their own source address
// everywhere; the nodes, the client and the root namespace route the pod
// CIDRs instead (see Cluster.routes).
func cniConfig(n *Node) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "pier-cluster",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      "cni0",
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR.String()}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": n.path("ipam"),
			},
		}},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// writeConfigs writes containerd's, the CNI's and the kubelet's files and
// the kubelet's kubeconfig (a node client certificate, through the relay).
func (n *Node) writeConfigs(c *Cluster) error {
	for _, d := range []string{"root", "state", "tmp", "opt", "net.d", "ipam", "logs", "kubelet", "pki"} {
		if err := os.MkdirAll(n.path(d), 0o700); err != nil {
			return err
		}
	}
	data := map[string]any{"Dir": n.Dir, "Socket": n.Socket, "Pause": pauseRef, "Name": n.Name, "Addr": n.Addr}
	for name, tmpl := range map[string]*template.Template{"containerd.toml": containerdConfig, "kubelet.yaml": kubeletConfig} {
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, data); err != nil {
			return err
		}
		if err := os.WriteFile(n.path(name), buf.Bytes(), 0o600); err != nil {
			return err
		}
	}
	cni, err := cniConfig(n)
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.path("net.d", "10-pier-cluster.conflist"), cni, 0o600); err != nil {
		return err
	}
	ca := c.Server.CACert()
	if err := os.WriteFile(n.path("ca.crt"), ca, 0o600); err != nil {
		return err
	}
	cert, key, err := c.Server.ClientCert("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	return writeKubeconfig(n.path("kubeconfig"), c.APIURL(), ca, cert, key)
}

func writeKubeconfig(path, server string, ca, cert, key []byte) error {
	cfg := clientcmdv1.Config{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []clientcmdv1.NamedCluster{{Name: "pier-cluster", Cluster: clientcmdv1.Cluster{
			Server: server, CertificateAuthorityData: ca,
		}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: "user", AuthInfo: clientcmdv1.AuthInfo{
			ClientCertificateData: cert, ClientKeyData: key,
		}}},
		Contexts: []clientcmdv1.NamedContext{{Name: "pier-cluster", Context: clientcmdv1.Context{
			Cluster: "pier-cluster", AuthInfo: "user",
		}}},
		CurrentContext: "pier-cluster",
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// startContainerd starts the node's containerd in its namespace and waits
// until it answers on its socket.
func (n *Node) startContainerd(ctx context.Context) error {
	p, err := startIn(n.Name, "containerd", n.path("containerd.log"), "containerd",
		"--config", n.path("containerd.toml"), "--log-level", "info")
	if err != nil {
		return err
	}
	n.containerd = p
	for {
		if _, err := os.Stat(n.Socket); err == nil {
			if _, err := n.Ctr(ctx, "version"); err == nil {
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("%s: containerd exited (%v)\n%s", n.Name, p.Err(), p.tail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: containerd not ready: %w\n%s", n.Name, ctx.Err(), p.tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startKubelet starts the node's kubelet in its namespace. The node is
// Ready some seconds later (Cluster.waitReady).
func (n *Node) startKubelet(bin string) error {
	p, err := startIn(n.Name, "kubelet", n.path("kubelet.log"), bin,
		"--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+n.path("kubeconfig"),
		"--root-dir="+n.path("kubelet"),
		"--cert-dir="+n.path("pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.Addr.String(),
		"--v=1")
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

// Ctr runs ctr against the node's containerd in the k8s.io namespace (the
// CRI's), returning its combined output.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: ctr %s: %w: %s", n.Name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// importImage imports an OCI or Docker archive and returns the names it
// held (ctr prints "unpacking NAME (sha256:…)...done" for each).
func (n *Node) importImage(ctx context.Context, archive string) ([]string, error) {
	out, err := n.Ctr(ctx, "images", "import", archive)
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.SplitSeq(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "unpacking ")
		if !ok {
			continue
		}
		if name, _, ok := strings.Cut(rest, " (sha256:"); ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: ctr images import %s named no image:\n%s", n.Name, archive, out)
	}
	return names, nil
}

// stop ends the kubelet (SIGTERM: it stops on its own in a second) and
// containerd. The shims and containers are left to scrub.
func (n *Node) stop() {
	n.kubelet.stop(10 * time.Second)
	n.containerd.stop(5 * time.Second)
}
