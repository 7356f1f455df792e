package nodesim

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// rawCodec hands grpc-go's client the message bytes as they are: the
// test has no generated code for the echo's messages, and reads the
// answer with protowire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestGRPCEchoMode: a Pod shaped as the Gateway suite's
// grpc-infra-backend (GRPC_ECHO_SERVER) answers grpc-go's calls in h2c on
// 3000: Echo and EchoTwo with the method, the caller's metadata,
// :authority and the Pod's identity; EchoThree and any other method
// Unimplemented.
func TestGRPCEchoMode(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs, "nodesim-grpcecho")
	startSim(t, cs, Options{Heartbeat: 500 * time.Millisecond})
	createEchoBasic(t, ns, "grpc-backend", corev1.EnvVar{Name: "GRPC_ECHO_SERVER", Value: "1"},
		corev1.EnvVar{Name: "SERVICE_NAME", Value: "grpc-svc"})
	pods := waitPods(t, cs, ns, 1)
	ip, pod := pods[0].Status.PodIP, pods[0].Name
	conn, err := grpc.NewClient(net.JoinHostPort(ip, "3000"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("grpc.example.com"), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(method string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), "x-probe", "seen"), 5*time.Second)
		defer cancel()
		in, out := []byte{}, []byte(nil)
		err := conn.Invoke(ctx, "/"+grpcEchoService+"/"+method, &in, &out)
		return out, err
	}
	for _, method := range []string{"Echo", "EchoTwo"} {
		out, err := call(method)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		a := protoFields(t, protoFields(t, out)[1][0])
		if got := string(a[1][0]); got != "/"+grpcEchoService+"/"+method {
			t.Errorf("%s: fully_qualified_method %q", method, got)
		}
		if got := string(a[3][0]); got != "grpc.example.com" {
			t.Errorf("%s: authority %q", method, got)
		}
		headers := map[string]string{}
		for _, h := range a[2] {
			f := protoFields(t, h)
			headers[string(f[1][0])] = string(f[2][0])
		}
		if headers["x-probe"] != "seen" || headers[":authority"] != "grpc.example.com" {
			t.Errorf("%s: headers %v lack the caller's metadata or :authority", method, headers)
		}
		c := protoFields(t, a[4][0])
		if string(c[1][0]) != ns || string(c[3][0]) != "grpc-svc" || string(c[4][0]) != pod {
			t.Errorf("%s: context %q %q %q, want %s grpc-svc %s", method, c[1], c[3], c[4], ns, pod)
		}
	}
	for _, method := range []string{"EchoThree", "Nope"} {
		if _, err := call(method); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s: %v, want Unimplemented", method, err)
		}
	}
}

// protoFields splits one message into its length-delimited fields by
// number (every field of the echo's messages is a string or a message).
func protoFields(t *testing.T, b []byte) map[protowire.Number][][]byte {
	t.Helper()
	out := map[protowire.Number][][]byte{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			t.Fatalf("bad tag in %x", b)
		}
		b = b[n:]
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			t.Fatalf("bad field %d", num)
		}
		out[num] = append(out[num], v)
		b = b[m:]
	}
	return out
}
