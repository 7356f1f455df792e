package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// manifests are the typed objects of one rendering. Every document decodes
// strictly (a misspelt or misplaced field fails) into its Kubernetes type.
type manifests struct {
	deployments     []appsv1.Deployment
	daemonSets      []appsv1.DaemonSet
	pdbs            []policyv1.PodDisruptionBudget
	services        []corev1.Service
	serviceAccounts []corev1.ServiceAccount
	clusterRoles    []rbacv1.ClusterRole
	roles           []rbacv1.Role
	clusterBindings []rbacv1.ClusterRoleBinding
	bindings        []rbacv1.RoleBinding
	ingressClasses  []networkingv1.IngressClass
	gatewayClasses  []gwv1.GatewayClass
	namespaces      []corev1.Namespace
	serviceMonitors []map[string]any // monitoring.coreos.com/v1: no Go type in pier's module
	configMaps      []corev1.ConfigMap
	kinds           []string
}

func decode(t testing.TB, rendered []byte) *manifests {
	t.Helper()
	m := &manifests{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rendered)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if tm.Kind == "" {
			continue // only comments
		}
		m.kinds = append(m.kinds, tm.Kind)
		var target any
		switch tm.Kind {
		case "Deployment":
			m.deployments = append(m.deployments, appsv1.Deployment{})
			target = &m.deployments[len(m.deployments)-1]
		case "DaemonSet":
			m.daemonSets = append(m.daemonSets, appsv1.DaemonSet{})
			target = &m.daemonSets[len(m.daemonSets)-1]
		case "PodDisruptionBudget":
			m.pdbs = append(m.pdbs, policyv1.PodDisruptionBudget{})
			target = &m.pdbs[len(m.pdbs)-1]
		case "Service":
			m.services = append(m.services, corev1.Service{})
			target = &m.services[len(m.services)-1]
		case "ServiceAccount":
			m.serviceAccounts = append(m.serviceAccounts, corev1.ServiceAccount{})
			target = &m.serviceAccounts[len(m.serviceAccounts)-1]
		case "ClusterRole":
			m.clusterRoles = append(m.clusterRoles, rbacv1.ClusterRole{})
			target = &m.clusterRoles[len(m.clusterRoles)-1]
		case "Role":
			m.roles = append(m.roles, rbacv1.Role{})
			target = &m.roles[len(m.roles)-1]
		case "ClusterRoleBinding":
			m.clusterBindings = append(m.clusterBindings, rbacv1.ClusterRoleBinding{})
			target = &m.clusterBindings[len(m.clusterBindings)-1]
		case "RoleBinding":
			m.bindings = append(m.bindings, rbacv1.RoleBinding{})
			target = &m.bindings[len(m.bindings)-1]
		case "IngressClass":
			m.ingressClasses = append(m.ingressClasses, networkingv1.IngressClass{})
			target = &m.ingressClasses[len(m.ingressClasses)-1]
		case "GatewayClass":
			m.gatewayClasses = append(m.gatewayClasses, gwv1.GatewayClass{})
			target = &m.gatewayClasses[len(m.gatewayClasses)-1]
		case "Namespace":
			m.namespaces = append(m.namespaces, corev1.Namespace{})
			target = &m.namespaces[len(m.namespaces)-1]
		case "ServiceMonitor":
			var sm map[string]any
			if err := yaml.Unmarshal(doc, &sm); err != nil {
				t.Fatal(err)
			}
			m.serviceMonitors = append(m.serviceMonitors, sm)
			continue
		case "ConfigMap":
			m.configMaps = append(m.configMaps, corev1.ConfigMap{})
			target = &m.configMaps[len(m.configMaps)-1]
		case "CustomResourceDefinition":
			continue
		default:
			t.Fatalf("unexpected kind %s rendered:\n%s", tm.Kind, doc)
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			t.Fatalf("%s: %v in\n%s", tm.Kind, err, doc)
		}
	}
	return m
}

func (m *manifests) agent(t testing.TB) *appsv1.DaemonSet {
	t.Helper()
	if len(m.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(m.daemonSets))
	}
	return &m.daemonSets[0]
}

func (m *manifests) controller(t testing.TB) *appsv1.Deployment {
	t.Helper()
	if len(m.deployments) != 1 {
		t.Fatalf("%d Deployments, want 1", len(m.deployments))
	}
	return &m.deployments[0]
}

func ciFile(t testing.TB, name string) []string {
	return []string{filepath.Join(chartDir(t), "ci", name)}
}

// hasArg reports whether args hold want exactly.
func hasArg(args []string, want string) bool { return slices.Contains(args, want) }

func argsWithPrefix(args []string, prefix string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out
}

func envNames(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// checkProbes: startup and liveness on /healthz, readiness on /readyz, all
// on the container's port named api, which is the --api-addr port, listened
// on the pod's address (env POD_IP from status.podIP).
func checkProbes(t *testing.T, role string, c corev1.Container, port int32) {
	t.Helper()
	var named int32
	for _, p := range c.Ports {
		if p.Name == "api" {
			named = p.ContainerPort
		}
	}
	if named != port {
		t.Errorf("%s: container port api = %d, want %d", role, named, port)
	}
	if want := fmt.Sprintf("--api-addr=[$(POD_IP)]:%d", port); !hasArg(c.Args, want) {
		t.Errorf("%s: args %q lack %s", role, c.Args, want)
	}
	if e := envNames(c)["POD_IP"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("%s: env POD_IP is %+v, want status.podIP", role, e)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", role, p.name)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || g.Port.String() != "api" {
			t.Errorf("%s: %s probe GET %s on port %s, want %s on api", role, p.name, g.Path, g.Port.String(), p.path)
		}
		if p.probe.TimeoutSeconds < 1 || p.probe.PeriodSeconds < 1 || p.probe.FailureThreshold < 1 {
			t.Errorf("%s: %s probe timings %+v", role, p.name, p.probe)
		}
	}
	if s := c.StartupProbe; s != nil && s.PeriodSeconds*s.FailureThreshold < 60 {
		t.Errorf("%s: the startup probe allows %ds, want a minute at least", role, s.PeriodSeconds*s.FailureThreshold)
	}
}

// TestHelmDefaults: what the default values install, decoded into typed
// objects.
func TestHelmDefaults(t *testing.T) {
	m := decode(t, render(t, ciFile(t, "default-values.yaml")))

	ds := m.agent(t)
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("agent: hostNetwork %v, dnsPolicy %s; want true, ClusterFirstWithHostNet", spec.HostNetwork, spec.DNSPolicy)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("agent: %d containers", len(spec.Containers))
	}
	ac := spec.Containers[0]
	sc := ac.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("agent: no capabilities")
	}
	wantCaps := []corev1.Capability{"NET_ADMIN", "NET_RAW", "NET_BIND_SERVICE", "SETUID", "SETGID", "KILL"}
	if !reflect.DeepEqual(sc.Capabilities.Add, wantCaps) || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("agent: capabilities add %v drop %v, want exactly add %v drop [ALL]", sc.Capabilities.Add, sc.Capabilities.Drop, wantCaps)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("agent: allowPrivilegeEscalation %v readOnlyRootFilesystem %v", sc.AllowPrivilegeEscalation, sc.ReadOnlyRootFilesystem)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("agent: privileged")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("agent: the token is automounted (mode 0644, readable by HAProxy's workers)")
	}
	var tokenMode int32 = -1
	var state *corev1.HostPathVolumeSource
	for _, v := range spec.Volumes {
		if v.Projected != nil && v.Projected.DefaultMode != nil {
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					tokenMode = *v.Projected.DefaultMode
				}
			}
		}
		if v.Name == "state" {
			state = v.HostPath
		}
	}
	if tokenMode != 0o400 {
		t.Errorf("agent: token volume mode %#o, want 0400", tokenMode)
	}
	if state == nil || state.Path != "/var/lib/pier" {
		t.Errorf("agent: state volume %+v, want hostPath /var/lib/pier", state)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g != 90 {
		t.Errorf("agent: terminationGracePeriodSeconds %v, want 90", g)
	}
	if !reflect.DeepEqual(spec.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}) {
		t.Errorf("agent: tolerations %+v, want [{operator: Exists}]", spec.Tolerations)
	}
	us := ds.Spec.UpdateStrategy
	if us.Type != appsv1.RollingUpdateDaemonSetStrategyType || us.RollingUpdate == nil ||
		us.RollingUpdate.MaxUnavailable == nil || us.RollingUpdate.MaxUnavailable.IntValue() != 1 ||
		us.RollingUpdate.MaxSurge == nil || us.RollingUpdate.MaxSurge.IntValue() != 0 {
		t.Errorf("agent: updateStrategy %+v, want RollingUpdate maxUnavailable 1 maxSurge 0", us)
	}
	for _, want := range []string{"agent", "--node=$(NODE_NAME)", "--on-exit=handover", "--lease-namespace=pier-system",
		"--haproxy-processes=4", "--haproxy-user=haproxy", "--log-level=info", "--log-format=text"} {
		if !hasArg(ac.Args, want) {
			t.Errorf("agent: args %q lack %s", ac.Args, want)
		}
	}
	if got := append(argsWithPrefix(ac.Args, "--vrrp"), argsWithPrefix(ac.Args, "--bgp")...); len(got) > 0 {
		t.Errorf("agent: addressing none, yet %q", got)
	}
	if ac.Image != "pier:0.1.0" {
		t.Errorf("agent: image %s, want pier:<appVersion>", ac.Image)
	}
	checkProbes(t, "agent", ac, 8083)

	d := m.controller(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("controller: replicas %v, want 2", d.Spec.Replicas)
	}
	ps := d.Spec.Template.Spec
	psc := ps.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.RunAsGroup == nil || *psc.RunAsGroup != 65532 {
		t.Errorf("controller: pod securityContext %+v, want runAsNonRoot, user and group 65532", psc)
	}
	if ps.HostNetwork {
		t.Error("controller: hostNetwork")
	}
	cc := ps.Containers[0]
	if c := cc.SecurityContext; c == nil || c.Capabilities == nil || !reflect.DeepEqual(c.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(c.Capabilities.Add) > 0 {
		t.Errorf("controller: capabilities %+v, want drop ALL, add none", c)
	}
	for _, want := range []string{"controller", "--lease-namespace=pier-system", "--lease-name=pier-controller",
		"--controller-name=pier.dev/ingress-controller", "--internal-pool=10.250.0.0/16"} {
		if !hasArg(cc.Args, want) {
			t.Errorf("controller: args %q lack %s", cc.Args, want)
		}
	}
	if cc.Image != "pier-controller:0.1.0" {
		t.Errorf("controller: image %s, want pier-controller:<appVersion>", cc.Image)
	}
	checkProbes(t, "controller", cc, 8082)
	aff := ps.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("controller: affinity %+v, want a preferred pod anti-affinity", aff)
	}
	term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if term.TopologyKey != "kubernetes.io/hostname" || !reflect.DeepEqual(term.LabelSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("controller: anti-affinity term %+v, want hostname and the Deployment's selector", term)
	}

	if len(m.pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want 1", len(m.pdbs))
	}
	pdb := m.pdbs[0]
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 ||
		!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget %+v, want minAvailable 1 on the controller's selector", pdb.Spec)
	}

	if len(m.ingressClasses) != 1 || m.ingressClasses[0].Name != "pier" || m.ingressClasses[0].Spec.Controller != "pier.dev/ingress-controller" {
		t.Errorf("IngressClasses %+v, want pier of pier.dev/ingress-controller", m.ingressClasses)
	} else if _, ok := m.ingressClasses[0].Annotations["ingressclass.kubernetes.io/is-default-class"]; ok {
		t.Error("the IngressClass is the default class without ingressClass.default")
	}
	if len(m.gatewayClasses) != 0 || len(m.serviceMonitors) != 0 || len(m.namespaces) != 0 {
		t.Errorf("rendered by default: %d GatewayClasses, %d ServiceMonitors, %d Namespaces; want none", len(m.gatewayClasses), len(m.serviceMonitors), len(m.namespaces))
	}

	// The metrics Services select each role's pods and reach its API port.
	ports := map[string]int32{}
	for _, s := range m.services {
		if s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses {
			t.Errorf("Service %s: clusterIP %q publishNotReadyAddresses %v, want headless listing unready pods", s.Name, s.Spec.ClusterIP, s.Spec.PublishNotReadyAddresses)
		}
		var want map[string]string
		switch s.Name {
		case "pier-controller-metrics":
			want = d.Spec.Selector.MatchLabels
		case "pier-agent-metrics":
			want = ds.Spec.Selector.MatchLabels
		}
		if !reflect.DeepEqual(s.Spec.Selector, want) {
			t.Errorf("Service %s: selector %v, want %v", s.Name, s.Spec.Selector, want)
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.String() == "api" {
				ports[s.Name] = p.Port
			}
		}
	}
	if !reflect.DeepEqual(ports, map[string]int32{"pier-controller-metrics": 8082, "pier-agent-metrics": 8083}) {
		t.Errorf("metrics Services' ports %v, want controller 8082 and agent 8083", ports)
	}

	// The identities the pods run as exist and are bound.
	sas := map[string]bool{}
	for _, sa := range m.serviceAccounts {
		sas[sa.Name] = sa.Namespace == "pier-system"
	}
	for _, name := range []string{ps.ServiceAccountName, spec.ServiceAccountName} {
		if !sas[name] {
			t.Errorf("ServiceAccount %q of a pod is not rendered in pier-system", name)
		}
	}
	if len(m.clusterRoles) != 2 || len(m.clusterBindings) != 2 || len(m.roles) != 2 || len(m.bindings) != 2 {
		t.Errorf("RBAC: %d ClusterRoles, %d ClusterRoleBindings, %d Roles, %d RoleBindings; want 2 of each",
			len(m.clusterRoles), len(m.clusterBindings), len(m.roles), len(m.bindings))
	}
}

// TestHelmAddressing: the VRRP and BGP values become the agent's flags, the
// pools the controller's.
func TestHelmAddressing(t *testing.T) {
	t.Run("vrrp", func(t *testing.T) {
		m := decode(t, render(t, ciFile(t, "vrrp-values.yaml")))
		args := m.agent(t).Spec.Template.Spec.Containers[0].Args
		if got := argsWithPrefix(args, "--vrrp"); !reflect.DeepEqual(got, []string{"--vrrp-interface=eth0"}) {
			t.Errorf("agent VRRP args %q, want --vrrp-interface=eth0", got)
		}
		if got := argsWithPrefix(args, "--bgp"); len(got) > 0 {
			t.Errorf("agent: BGP args with VRRP: %q", got)
		}
		if sel := m.agent(t).Spec.Template.Spec.NodeSelector; sel["node-role.example.com/edge"] != "true" {
			t.Errorf("agent nodeSelector %v", sel)
		}
		cargs := m.controller(t).Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--vrrp-router-ids=1-100", "--internal-pool=10.250.0.0/16", "--public-pool=203.0.113.0/24"} {
			if !hasArg(cargs, want) {
				t.Errorf("controller args %q lack %s", cargs, want)
			}
		}
		if ic := m.ingressClasses; len(ic) != 1 || ic[0].Annotations["ingressclass.kubernetes.io/is-default-class"] != "true" {
			t.Errorf("IngressClass %+v, want the default class", ic)
		}
	})
	t.Run("bgp", func(t *testing.T) {
		m := decode(t, render(t, ciFile(t, "bgp-values.yaml")))
		args := m.agent(t).Spec.Template.Spec.Containers[0].Args
		want := []string{"--bgp-asn=64512", "--bgp-peer-asn=64512", "--bgp-peer=192.0.2.1",
			"--bgp-peer=192.0.2.2:1790@64513", "--bgp-peer=[2001:db8::1]:179", "--bgp-next-hop=$(POD_IP)",
			"--bgp-standby-prepend=0", "--bgp-hold-time=30", "--bgp-max-prefixes=200", "--bgp-password-file=/etc/pier/bgp/passwords",
			"--bgp-bfd", "--bgp-bfd-interval=150ms", "--bgp-bfd-multiplier=4"}
		if got := argsWithPrefix(args, "--bgp"); !reflect.DeepEqual(got, want) {
			t.Errorf("agent BGP args\n got %q\nwant %q", got, want)
		}
		// The password file is the Secret's key, mounted where the flag
		// says, readable by root only.
		pod := m.agent(t).Spec.Template.Spec
		mounted := false
		for _, vm := range pod.Containers[0].VolumeMounts {
			mounted = mounted || (vm.Name == "bgp-passwords" && vm.MountPath == "/etc/pier/bgp" && vm.ReadOnly)
		}
		var secret *corev1.SecretVolumeSource
		for _, v := range pod.Volumes {
			if v.Name == "bgp-passwords" {
				secret = v.Secret
			}
		}
		if !mounted || secret == nil || secret.SecretName != "pier-bgp-passwords" || secret.DefaultMode == nil || *secret.DefaultMode != 0o400 ||
			len(secret.Items) != 1 || secret.Items[0].Key != "passwords" || secret.Items[0].Path != "passwords" {
			t.Errorf("agent: BGP password Secret mounted %t, volume %+v; want pier-bgp-passwords' key passwords at /etc/pier/bgp/passwords, mode 0400", mounted, secret)
		}
		if got := argsWithPrefix(args, "--vrrp"); len(got) > 0 {
			t.Errorf("agent: VRRP args with BGP: %q", got)
		}
		if !hasArg(args, "--log-format=json") {
			t.Errorf("agent args %q lack --log-format=json", args)
		}
	})
}

// TestHelmOptionalObjects: the GatewayClass, the ServiceMonitors, the API
// server's address, images by digest, and the other role options.
func TestHelmOptionalObjects(t *testing.T) {
	t.Run("gateway", func(t *testing.T) {
		m := decode(t, render(t, ciFile(t, "gateway-values.yaml")))
		if gc := m.gatewayClasses; len(gc) != 1 || gc[0].Name != "pier-gateway" || gc[0].Spec.ControllerName != "pier.dev/gateway-controller" {
			t.Errorf("GatewayClasses %+v, want pier-gateway of pier.dev/gateway-controller", gc)
		}
		for role, c := range map[string]corev1.Container{
			"agent": m.agent(t).Spec.Template.Spec.Containers[0], "controller": m.controller(t).Spec.Template.Spec.Containers[0],
		} {
			env := envNames(c)
			if env["KUBERNETES_SERVICE_HOST"].Value != "192.0.2.10" || env["KUBERNETES_SERVICE_PORT"].Value != "6443" {
				t.Errorf("%s: env %+v, want KUBERNETES_SERVICE_HOST 192.0.2.10 and _PORT 6443", role, c.Env)
			}
		}
		a := m.agent(t)
		aargs := a.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--on-exit=drain", "--haproxy-processes=0", "--haproxy-user=", "--hard-stop-after=90s"} {
			if !hasArg(aargs, want) {
				t.Errorf("agent args %q lack %s", aargs, want)
			}
		}
		if g := a.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 120 {
			t.Errorf("agent grace period %v, want 120", g)
		}
		cargs := m.controller(t).Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--lease-name=pier-gw", "--lease-duration=20s", "--renew-deadline=15s", "--retry-period=3s", "--watch-namespace=team-a"} {
			if !hasArg(cargs, want) {
				t.Errorf("controller args %q lack %s", cargs, want)
			}
		}
	})
	t.Run("servicemonitor", func(t *testing.T) {
		m := decode(t, render(t, ciFile(t, "servicemonitor-values.yaml")))
		if len(m.serviceMonitors) != 2 {
			t.Fatalf("%d ServiceMonitors, want 2 (controller, agent)", len(m.serviceMonitors))
		}
		for _, sm := range m.serviceMonitors {
			meta := sm["metadata"].(map[string]any)
			if sm["apiVersion"] != "monitoring.coreos.com/v1" || meta["labels"].(map[string]any)["release"] != "prometheus" {
				t.Errorf("ServiceMonitor %v", sm)
			}
			ep := sm["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
			if ep["port"] != "metrics" || ep["interval"] != "30s" {
				t.Errorf("ServiceMonitor %s endpoint %v, want port metrics every 30s", meta["name"], ep)
			}
		}
		// The dashboard, byte for byte the one deploy/grafana holds, where
		// Grafana's sidecar finds it.
		if len(m.configMaps) != 1 || m.configMaps[0].Labels["grafana_dashboard"] != "1" {
			t.Fatalf("dashboard ConfigMaps %+v, want one labelled grafana_dashboard=1", m.configMaps)
		}
		want, err := os.ReadFile(filepath.Join(chartDir(t), "dashboards", "pier-dashboard.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.configMaps[0].Data["pier-dashboard.json"]; got != strings.TrimSuffix(string(want), "\n") {
			t.Errorf("the dashboard ConfigMap does not hold the dashboard (%d bytes, want %d)", len(got), len(want))
		}
		if len(decode(t, render(t, ciFile(t, "default-values.yaml"))).configMaps) != 0 {
			t.Error("a dashboard ConfigMap by default")
		}
		d := m.controller(t)
		if *d.Spec.Replicas != 3 || len(m.pdbs) != 1 || m.pdbs[0].Spec.MinAvailable.IntValue() != 2 {
			t.Errorf("replicas %d, PodDisruptionBudgets %+v; want 3 replicas, minAvailable 2", *d.Spec.Replicas, m.pdbs)
		}
	})
	t.Run("digest", func(t *testing.T) {
		m := decode(t, render(t, ciFile(t, "digest-values.yaml")))
		ac := m.agent(t).Spec.Template.Spec.Containers[0]
		cc := m.controller(t).Spec.Template.Spec.Containers[0]
		if want := "registry.example.com/platform/pier-agent@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"; ac.Image != want {
			t.Errorf("agent image %s, want %s", ac.Image, want)
		}
		if want := "registry.example.com/platform/pier-controller@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"; cc.Image != want {
			t.Errorf("controller image %s, want %s", cc.Image, want)
		}
		if ac.ImagePullPolicy != corev1.PullAlways || cc.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("pull policies %s, %s; want Always", ac.ImagePullPolicy, cc.ImagePullPolicy)
		}
		if s := m.agent(t).Spec.Template.Spec.ImagePullSecrets; len(s) != 1 || s[0].Name != "registry-credentials" {
			t.Errorf("agent imagePullSecrets %v", s)
		}
	})
	t.Run("tag", func(t *testing.T) {
		m := decode(t, render(t, nil, "image.tag=1.2.3", "agent.image.tag=1.2.4"))
		if got := m.agent(t).Spec.Template.Spec.Containers[0].Image; got != "pier:1.2.4" {
			t.Errorf("agent image %s, want pier:1.2.4 (its own tag wins)", got)
		}
		if got := m.controller(t).Spec.Template.Spec.Containers[0].Image; got != "pier-controller:1.2.3" {
			t.Errorf("controller image %s, want pier-controller:1.2.3 (image.tag)", got)
		}
	})
	t.Run("no pdb with one replica", func(t *testing.T) {
		m := decode(t, render(t, nil, "controller.replicas=1"))
		if len(m.pdbs) != 0 {
			t.Error("a PodDisruptionBudget of minAvailable 1 on one replica would block every drain")
		}
	})
}

// selectors returns every immutable or identity-defining selector of a
// rendering: the workloads', the PodDisruptionBudget's and the Services'.
func selectors(t testing.TB, m *manifests) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, d := range m.deployments {
		out["Deployment/"+d.Name] = d.Spec.Selector.MatchLabels
		checkSelected(t, "Deployment/"+d.Name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	for _, d := range m.daemonSets {
		out["DaemonSet/"+d.Name] = d.Spec.Selector.MatchLabels
		checkSelected(t, "DaemonSet/"+d.Name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	for _, p := range m.pdbs {
		out["PodDisruptionBudget/"+p.Name] = p.Spec.Selector.MatchLabels
	}
	for _, s := range m.services {
		out["Service/"+s.Name] = s.Spec.Selector
	}
	return out
}

func checkSelected(t testing.TB, what string, sel, labels map[string]string) {
	t.Helper()
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("%s: the pod template's labels %v do not match its selector %v", what, labels, sel)
		}
	}
}

// TestHelmSelectorsStable: an upgrade (another image tag, another chart
// version) must not change a selector, which the API server refuses to
// change on a Deployment or DaemonSet; none holds a version.
func TestHelmSelectorsStable(t *testing.T) {
	a := selectors(t, decode(t, render(t, nil, "image.tag=0.1.0")))
	b := selectors(t, decode(t, render(t, nil, "image.tag=0.2.0", "controller.image.tag=0.2.1", "agent.image.digest=sha256:"+strings.Repeat("ab", 32))))
	if len(a) != 5 {
		t.Fatalf("selectors %v, want 5 (Deployment, DaemonSet, PodDisruptionBudget, 2 Services)", a)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("selectors changed with the image:\n%v\n%v", a, b)
	}
	for what, sel := range a {
		for k, v := range sel {
			if strings.Contains(k, "version") || k == "helm.sh/chart" || strings.Contains(v, "0.1.0") {
				t.Errorf("%s: selector %v holds a version", what, sel)
			}
		}
		if sel["app.kubernetes.io/component"] == "" || sel["app.kubernetes.io/instance"] != "pier" {
			t.Errorf("%s: selector %v, want component and instance", what, sel)
		}
	}
}
