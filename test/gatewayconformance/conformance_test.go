//go:build linux

// Package gatewayconformance runs the upstream Gateway API conformance
// suite (sigs.k8s.io/gateway-api/conformance, unmodified) against pier's
// Kubernetes mode on the API-server harness of test/kubeapi: etcd,
// kube-apiserver and kube-controller-manager, test/nodesim standing in for
// the kubelet (every Pod, the suite's echo-basic backends included, is
// answered by internal/echo, or by nodesim's play of echo-basic's gRPC, TCP
// and UDP modes), and the real `pier controller` and
// `pier agent` processes under deploy/rbac.yaml, all inside a network
// namespace of its own (test/netns) where VIPs and pod IPs are local.
//
// It is a Go module of its own so that the suite's k8s.io/* v0.37 and Go
// 1.27 never reach pier's go.mod: pier is driven as a process (PIER_BIN),
// and only the harness packages are compiled here, against the suite's
// versions. pier's Go is 1.26, so GOTOOLCHAIN names the newer one (the go
// command fetches it from the module proxy on first use):
//
//	cd test/gatewayconformance
//	GOTOOLCHAIN=go1.27.3 PIER_BIN=$PWD/../../bin/pier PIER_KUBE_APISERVER=... go test -count=1 -timeout 20m .
//
// GATEWAY_CONFORMANCE_RUN_TEST runs one test of the suite (its ShortName);
// GATEWAY_CONFORMANCE_TRY_FEATURES adds features to try;
// GATEWAY_CONFORMANCE_CHANNEL=experimental installs the experimental CRDs
// (none of the three writes the report); GATEWAY_CONFORMANCE_REPORT
// writes it elsewhere (CI).
package gatewayconformance

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	conformanceconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"

	"pier.dev/pier/internal/gatewayfeatures"
	"pier.dev/pier/test/kubeapi"
	"pier.dev/pier/test/netns"
	"pier.dev/pier/test/nodesim"
)

const (
	className         = "pier"
	gatewayController = "pier.dev/gateway-controller"
	leaseNS           = "pier-system"
	activeNode        = "node-a"
	reportPath        = "../../docs/conformance/v1.7.0-pier-report.yaml"
)

// The controller's pools (--internal-pool, --public-pool) and the
// addresses GatewayStaticAddresses asks for: the last of the public pool,
// which no other Gateway of the suite takes first (pier hands out the
// lowest free one), and one inside the namespace's routes but outside
// both pools.
const (
	internalPool    = "10.250.2.0/24"
	publicPool      = "10.250.3.0/24"
	usableAddress   = "10.250.3.254"
	unusableAddress = "10.250.9.1"
)

func ptrTo[T any](v T) *T { return &v }

// skipTests are the suite's tests that fail against pier today, each
// with its reason in docs/gateway-api.md ("The conformance suite").
var skipTests = []string{}

func TestMain(m *testing.M) {
	netns.Enter(netns.Options{Prefixes: []netip.Prefix{netns.PodPrefix, netns.VIPPrefix}, Prepare: kubeapi.Prepare(true)})
	kubeapi.Main(m, kubeapi.Options{ControllerManager: true})
}

func TestGatewayConformance(t *testing.T) {
	if os.Getenv("PIER_KUBE_APISERVER") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("PIER_KUBE_APISERVER is not set: CI must run the suite (hack/test.sh sets it)")
		}
		t.Skip("PIER_KUBE_APISERVER is not set (hack/test-apiserver.sh prints it)")
	}
	srv := kubeapi.Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := srv.Config()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	crd, _ := kubeapi.RepoPath("deploy", "crd-loadbalancers.yaml")
	rbac, _ := kubeapi.RepoPath("deploy", "rbac.yaml")
	if err := kubeapi.ApplyFiles(ctx, cfg, crd, rbac); err != nil {
		t.Fatal(err)
	}
	installGatewayCRDs(ctx, t, cfg)
	if _, err := nodesim.Start(context.Background(), cs, nodesim.Options{Heartbeat: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ctlKube := tokenKubeconfig(ctx, t, cs, srv, "pier-controller")
	agentKube := tokenKubeconfig(ctx, t, cs, srv, "pier-agent")

	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(*runtime.Scheme) error{v1alpha3.Install, v1alpha2.Install, v1beta1.Install, xv1alpha1.Install, gwv1.Install, apiextensionsv1.AddToScheme} {
		if err := install(c.Scheme()); err != nil {
			t.Fatal(err)
		}
	}
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec: gwv1.GatewayClassSpec{ControllerName: gatewayController}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}

	agent := startPier(t, "agent", "agent-"+activeNode, func(api, state string) []string {
		return []string{"--kubeconfig", agentKube, "--node", activeNode, "--state-dir", state,
			"--api-addr", api, "--hard-stop-after", "5s"}
	})
	ctl := startPier(t, "controller", "ctl", func(api, _ string) []string {
		return []string{"--kubeconfig", ctlKube, "--api-addr", api, "--identity", "ctl",
			"--internal-pool", internalPool, "--public-pool", publicPool,
			"--node-selector", "kubernetes.io/hostname=" + activeNode, "--watch-namespace", "",
			"--lease-namespace", leaseNS, "--lease-name", "pier-gateway-conformance",
			"--allow-loopback-endpoints"}
	})
	_, _ = agent, ctl
	t.Logf("harness set up in %s", time.Since(start).Round(time.Millisecond))

	log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(false)))
	timeouts := conformanceconfig.DefaultTimeoutConfig()
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     className,
			CleanupBaseResources: true,
			CleanupTestResources: true,
			SkipTests:            skipTests,
			TimeoutConfig:        timeouts,
			// Every profile pier passes, in one invocation: the Gateway
			// tests they share run once.
			ConformanceProfiles: []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName,
				suite.GatewayGRPCConformanceProfileName, suite.GatewayTLSConformanceProfileName,
				suite.GatewayTCPConformanceProfileName, suite.GatewayUDPConformanceProfileName},
			ReportOutputPath: reportPath,
			RunTest:          os.Getenv("GATEWAY_CONFORMANCE_RUN_TEST"),
			// GatewayStaticAddresses: an address of the controller's public
			// pool, which pier binds, and one outside both pools, which it
			// refuses (Programmed=False/AddressNotUsable).
			UsableNetworkAddresses:   []gwv1.GatewaySpecAddress{{Type: ptrTo(gwv1.IPAddressType), Value: usableAddress}},
			UnusableNetworkAddresses: []gwv1.GatewaySpecAddress{{Type: ptrTo(gwv1.IPAddressType), Value: unusableAddress}},
			Implementation: confv1.Implementation{
				Organization: "pier",
				Project:      "pier",
				URL:          "https://pier.dev",
				Version:      version(),
				Contact:      []string{"https://pier.dev"},
			},
		},
		Client:     c,
		Clientset:  cs,
		RestConfig: cfg,
	}
	// The features tested are those pier publishes in the class's
	// status.supportedFeatures: the suite infers them from the class
	// (its report says "Inferred"), so the class says exactly what passes.
	// Running one test or trying more features turns inference off, so
	// they are passed by hand then, from the same status.
	declared := waitClassFeatures(ctx, t, c)
	// GATEWAY_CONFORMANCE_TRY_FEATURES (comma-separated) tries features
	// not declared yet, to see whether they pass.
	var try []features.FeatureName
	for _, f := range strings.Split(os.Getenv("GATEWAY_CONFORMANCE_TRY_FEATURES"), ",") {
		if f = strings.TrimSpace(f); f != "" {
			try = append(try, features.FeatureName(f))
		}
	}
	if opts.RunTest != "" || len(try) > 0 {
		opts.SupportedFeatures = append(declared, try...)
	}
	if path, ok := os.LookupEnv("GATEWAY_CONFORMANCE_REPORT"); ok {
		opts.ReportOutputPath = path // CI: not over the committed report
	}
	if opts.RunTest != "" || os.Getenv("GATEWAY_CONFORMANCE_TRY_FEATURES") != "" || os.Getenv("GATEWAY_CONFORMANCE_CHANNEL") != "" {
		opts.ReportOutputPath = "" // not the report of what pier declares
	}
	conformance.RunConformanceWithOptions(t, opts)
	t.Logf("suite done %s after the harness started", time.Since(start).Round(time.Second))
}

// waitClassFeatures waits for pier to accept the class and publish its
// status.supportedFeatures, and checks they are what pier declares
// (package gatewayfeatures), sorted as the spec requires.
func waitClassFeatures(ctx context.Context, t *testing.T, c client.Client) []features.FeatureName {
	t.Helper()
	want := gatewayfeatures.Supported()
	var got []string
	for {
		var class gwv1.GatewayClass
		if err := c.Get(ctx, client.ObjectKey{Name: className}, &class); err == nil {
			got = got[:0]
			for _, f := range class.Status.SupportedFeatures {
				got = append(got, string(f.Name))
			}
			if len(got) > 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GatewayClass %s: no status.supportedFeatures published: %v", className, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("GatewayClass %s publishes supportedFeatures %v, want %v", className, got, want)
	}
	out := make([]features.FeatureName, len(got))
	for i, f := range got {
		out[i] = features.FeatureName(f)
	}
	return out
}

// version is what the pier binary under test says it is (`pier
// version`: the `git describe` hack/build.sh stamps).
func version() string {
	out, err := exec.Command(os.Getenv("PIER_BIN"), "version").Output()
	if err != nil {
		return "dev"
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "pier ")
}

// installGatewayCRDs applies the standard-channel CRDs of the
// sigs.k8s.io/gateway-api version this module requires (the suite's),
// from the module cache; GATEWAY_CONFORMANCE_CHANNEL=experimental applies
// the experimental channel's instead (HTTPRoute retry, for one, is only
// there in v1.6.3; the suite refuses a mix of channels).
func installGatewayCRDs(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/gateway-api: %v", err)
	}
	channel := "standard"
	if c := os.Getenv("GATEWAY_CONFORMANCE_CHANNEL"); c != "" {
		if c != "standard" && c != "experimental" {
			t.Fatalf("GATEWAY_CONFORMANCE_CHANNEL=%q: standard or experimental", c)
		}
		channel = c
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "config", "crd", channel, "gateway.networking.k8s.io_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s CRDs in the module cache (%v)", channel, err)
	}
	if err := kubeapi.ApplyFiles(ctx, cfg, files...); err != nil {
		t.Fatalf("install the Gateway API CRDs: %v", err)
	}
}

// tokenKubeconfig writes a kubeconfig holding a token of ServiceAccount
// pier-system/sa, so pier runs with exactly the permissions of rbac.yaml.
func tokenKubeconfig(ctx context.Context, t *testing.T, cs kubernetes.Interface, srv *kubeapi.Server, sa string) string {
	t.Helper()
	day := int64(86400)
	tok, err := cs.CoreV1().ServiceAccounts(leaseNS).CreateToken(ctx, sa,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &day}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", sa, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: srv.Host(), CertificateAuthorityData: srv.Config().CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: sa}
	cfg.CurrentContext = "test"
	path := filepath.Join(srv.Dir(), sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startPier runs `pier <role>` with the flags args returns for its API
// address and a fresh state folder, logging to a file whose tail the test
// prints when it fails; the cleanup stops it (and the HAProxy instances an
// agent leaves running, by design).
func startPier(t *testing.T, role, name string, args func(api, state string) []string) string {
	t.Helper()
	state, err := os.MkdirTemp("", "pgc") // short: HAProxy's socket paths must fit
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.CreateTemp("", "pier-gwconf-"+name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	api := freeAddr(t)
	cmd := exec.Command(os.Getenv("PIER_BIN"), append([]string{role}, args(api, state)...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Killed with the test binary (^C, a timeout), which would skip the
	// cleanup and leave them serving in its namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		stopHAProxies(state)
		os.RemoveAll(state)
		if t.Failed() {
			t.Logf("%s log: %s", name, logFile.Name())
		} else {
			os.Remove(logFile.Name())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get("http://" + api + "/metrics"); err == nil {
			resp.Body.Close()
			return logFile.Name()
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("%s exited during start-up:\n%s", name, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no answer on %s within 20s", name, api)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// stopHAProxies ends the HAProxy instances an agent left under state.
func stopHAProxies(state string) {
	pidFiles, _ := filepath.Glob(filepath.Join(state, "haproxy", "*", "haproxy.pid"))
	for _, f := range pidFiles {
		b, _ := os.ReadFile(f)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
