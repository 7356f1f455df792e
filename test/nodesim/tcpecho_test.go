package nodesim

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/tlscert"
)

// TestTCPEchoMode: a Pod shaped as the Gateway suite's tcp-backend
// (TCP_ECHO_SERVER, a certificate mounted at TLS_SERVER_CERT and
// TLS_SERVER_PRIV_KEY) speaks echo-basic's line protocol on 3000 in the
// clear and on 8443 over TLS with that certificate, the TLS answer naming
// the client's SNI; HTTP is not served; a Pod whose TCP_PORT is not a
// port number never becomes Ready.
func TestTCPEchoMode(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs, "nodesim-tcpecho")
	startSim(t, cs, Options{Heartbeat: 500 * time.Millisecond})
	certPEM, keyPEM, err := tlscert.SelfSigned([]string{"abc.example.com"}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "passthrough"},
		Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}}
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createEchoBasic(t, ns, "tcp-backend", tcpMode, corev1.EnvVar{Name: "TLS_SERVER_CERT", Value: "/etc/secret-volume/crt"},
		corev1.EnvVar{Name: "TLS_SERVER_PRIV_KEY", Value: "/etc/secret-volume/key"})
	pods := waitPods(t, cs, ns, 1)
	ip, pod := pods[0].Status.PodIP, pods[0].Name

	plain := tcpEchoTalk(t, func() (net.Conn, error) {
		return net.DialTimeout("tcp", netip.AddrPortFrom(netip.MustParseAddr(ip), 3000).String(), 5*time.Second)
	})
	if plain.isTLS != "false" || plain.answer.IsTLS || plain.answer.TLS != nil {
		t.Errorf("plain: IS_TLS %q, answer %+v", plain.isTLS, plain.answer)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	overTLS := tcpEchoTalk(t, func() (net.Conn, error) {
		d := tls.Dialer{Config: &tls.Config{ServerName: "abc.example.com", RootCAs: roots, MinVersion: tls.VersionTLS12}}
		return d.Dial("tcp", netip.AddrPortFrom(netip.MustParseAddr(ip), 8443).String())
	})
	if overTLS.isTLS != "true" || overTLS.answer.TLS == nil || overTLS.answer.TLS.ServerName != "abc.example.com" ||
		!strings.HasPrefix(overTLS.answer.TLS.Version, "TLS 1.") {
		t.Errorf("TLS: IS_TLS %q, answer %+v, session %+v", overTLS.isTLS, overTLS.answer, overTLS.answer.TLS)
	}
	for name, a := range map[string]tcpEchoAnswer{"plain": plain.answer, "TLS": overTLS.answer} {
		if a.Namespace != ns || a.Pod != pod || a.TCPPort != "3000" || a.TLSPort != "8443" {
			t.Errorf("%s: answer %+v, want namespace %s, pod %s, ports 3000 and 8443", name, a.tcpEchoPod, ns, pod)
		}
	}
	if _, err := tryGet(ip, 3000); err == nil {
		t.Error("HTTP served on 3000 in TCP mode")
	}

	bad := namespace(t, cs, "nodesim-tcpecho-bad")
	createEchoBasic(t, bad, "tcp-bad", tcpMode, corev1.EnvVar{Name: "TCP_PORT", Value: "70000"})
	time.Sleep(3 * time.Second)
	list, err := cs.CoreV1().Pods(bad).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if ready(p) {
			t.Errorf("pod %s with TCP_PORT=70000 is Ready", p.Name)
		}
	}
}

var tcpMode = corev1.EnvVar{Name: "TCP_ECHO_SERVER", Value: "1"}

type tcpEchoSession struct {
	isTLS  string
	answer tcpEchoAnswer
}

// tcpEchoTalk runs the suite client's exchange: welcome, PING, IS_TLS,
// TEST.
func tcpEchoTalk(t *testing.T, dial func() (net.Conn, error)) tcpEchoSession {
	t.Helper()
	conn, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	line := func(send string) string {
		t.Helper()
		if send != "" {
			fmt.Fprintf(conn, "%s\n", send)
		}
		s, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", send, err)
		}
		return s
	}
	if w := line(""); w != tcpEchoWelcome {
		t.Fatalf("welcome %q", w)
	}
	if p := line("PING"); p != "PONG\n" {
		t.Fatalf("PING answered %q", p)
	}
	var s tcpEchoSession
	s.isTLS = strings.TrimSuffix(line("IS_TLS"), "\n")
	if err := json.Unmarshal([]byte(line("TEST")), &s.answer); err != nil {
		t.Fatal(err)
	}
	return s
}

// createEchoBasic creates a one-replica Deployment shaped as the suite's
// echo-basic backends, its mode chosen by the extra environment.
func createEchoBasic(t *testing.T, ns, name string, extra ...corev1.EnvVar) {
	t.Helper()
	cs := clientset(t)
	labels := map[string]string{"app": name}
	one := int32(1)
	env := append([]corev1.EnvVar{
		fieldEnv("POD_NAME", "metadata.name"),
		fieldEnv("NAMESPACE", "metadata.namespace"),
	}, extra...)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: name, Image: "registry.k8s.io/gateway-api/conformance/echo-basic", Env: env,
						VolumeMounts: []corev1.VolumeMount{{Name: "secret-volume", MountPath: "/etc/secret-volume"}},
					}},
					Volumes: []corev1.Volume{{Name: "secret-volume", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: "passthrough",
						Items:      []corev1.KeyToPath{{Key: "tls.crt", Path: "crt"}, {Key: "tls.key", Path: "key"}},
					}}}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestUDPEchoMode: a Pod shaped as the Gateway suite's udp-echo
// (UDP_ECHO_SERVER) answers each datagram on 8080 with JSON naming the
// payload, its Service and itself, and serves no TCP there.
func TestUDPEchoMode(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs, "nodesim-udpecho")
	startSim(t, cs, Options{Heartbeat: 500 * time.Millisecond})
	createEchoBasic(t, ns, "udp-echo", corev1.EnvVar{Name: "UDP_ECHO_SERVER", Value: "1"},
		corev1.EnvVar{Name: "SERVICE_NAME", Value: "udp-echo"})
	pods := waitPods(t, cs, ns, 1)
	ip, pod := pods[0].Status.PodIP, pods[0].Name
	conn, err := net.Dial("udp", net.JoinHostPort(ip, "8080"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	for _, payload := range []string{"gateway-api-conformance-udp-echo", "second"} {
		if _, err := conn.Write([]byte(payload)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2048)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		var got udpEchoAnswer
		if err := json.Unmarshal(buf[:n], &got); err != nil {
			t.Fatalf("%q: %v", buf[:n], err)
		}
		if want := (udpEchoAnswer{Request: payload, Namespace: ns, Service: "udp-echo", Pod: pod}); got != want {
			t.Errorf("answer %+v, want %+v", got, want)
		}
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "8080"), time.Second); err == nil {
		c.Close()
		t.Error("TCP served on 8080 in UDP mode")
	}
}
