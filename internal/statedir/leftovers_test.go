package statedir

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestLeftovers(t *testing.T) {
	dir := t.TempDir()
	const haproxyLB, nativeLB = "a4656d03-6183-53fd-ab1a-13417b24aac2", "0b1d6a0e-2f4c-5d8e-9a7b-3c2d1e0f4a5b"
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("haproxy/"+haproxyLB+"/haproxy.conf", "# pier load balancer "+haproxyLB+"\n\n"+
		"frontend fe_80\n    bind 127.10.0.1:80 transparent\n    bind 127.20.0.1:80 transparent\n"+
		"frontend fe_443\n    bind 127.10.0.1:443 transparent ssl crt-list x\n    bind [2001:db8::7]:443 transparent\n"+
		"frontend inner\n    bind abns@pier-x-443 accept-proxy\n")
	write("haproxy/shard-0/process.conf", "bind 10.0.0.9:80\n")
	write("haproxy/landing/landing.conf", "bind 0.0.0.0:80\n")
	write("haproxy/not-a-uuid/haproxy.conf", "bind 10.0.0.8:80\n")
	write("native/"+nativeLB+".json", `{"uuid":"`+nativeLB+`","name":"shop/svc","vip":"127.10.0.5","fip":"127.20.0.5"}`)
	write("native/0b1d6a0e-2f4c-5d8e-9a7b-000000000000.json", `{"uuid":"someone-else","vip":"127.10.0.6"}`)

	got, err := Leftovers(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]string{
		nativeLB + " shop/svc [127.10.0.5 127.20.0.5]",
		haproxyLB + "  [127.10.0.1 127.20.0.1 2001:db8::7]",
	})
	var have []string
	for _, l := range got {
		have = append(have, fmt.Sprintf("%s %s %v", l.UUID, l.Name, l.Addrs))
	}
	if fmt.Sprint(have) != want {
		t.Errorf("Leftovers:\n got %v\nwant %v", have, want)
	}

	empty, err := Leftovers(t.TempDir())
	if err != nil || len(empty) != 0 {
		t.Errorf("an empty state folder: %v, %v", empty, err)
	}
}
