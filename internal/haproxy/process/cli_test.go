package process

import (
	"reflect"
	"testing"
	"time"
)

func TestParseShowProc(t *testing.T) {
	const header = "#<PID>          <type>          <reloads>       <uptime>        <version>      \n"
	tests := []struct {
		name    string
		in      string
		master  Proc
		workers []Proc
		wantErr bool
	}{{
		name: "fresh",
		in: header + "27911           master          0 [failed: 0]   0d00h00m01s     2.6.12-1+deb12u4\n" +
			"# workers\n27914           worker          0               0d00h00m01s     2.6.12-1+deb12u4\n# programs\n\n",
		master:  Proc{PID: 27911, Type: "master", Uptime: time.Second, Version: "2.6.12-1+deb12u4"},
		workers: []Proc{{PID: 27914, Type: "worker", Uptime: time.Second, Version: "2.6.12-1+deb12u4"}},
	}, {
		name: "failed reload: the old worker stays current",
		in: header + "8271            master          2 [failed: 1]   0d00h10m28s     2.6.12-1+deb12u4\n" +
			"# workers\n25217           worker          1               0d00h00m17s     2.6.12-1+deb12u4\n# programs\n",
		master:  Proc{PID: 8271, Type: "master", Reloads: 2, FailedReloads: 1, Uptime: 10*time.Minute + 28*time.Second, Version: "2.6.12-1+deb12u4"},
		workers: []Proc{{PID: 25217, Type: "worker", Reloads: 1, Uptime: 17 * time.Second, Version: "2.6.12-1+deb12u4"}},
	}, {
		name: "old worker draining",
		in: header + "8271            master          3 [failed: 0]   1d02h10m32s     2.6.12-1+deb12u4\n" +
			"# workers\n26361           worker          0               0d00h00m00s     2.6.12-1+deb12u4\n" +
			"# old workers\n25217           worker          2               0d00h00m21s     2.6.12-1+deb12u4\n" +
			"# programs\n1234            dataplaneapi    0               0d00h00m21s     -\n",
		master: Proc{PID: 8271, Type: "master", Reloads: 3, Uptime: 26*time.Hour + 10*time.Minute + 32*time.Second, Version: "2.6.12-1+deb12u4"},
		workers: []Proc{
			{PID: 26361, Type: "worker", Version: "2.6.12-1+deb12u4"},
			{PID: 25217, Type: "worker", Old: true, Reloads: 2, Uptime: 21 * time.Second, Version: "2.6.12-1+deb12u4"},
		},
	}, {
		name: "empty", in: "", wantErr: true,
	}, {
		name: "garbage line", in: header + "8271 master x 0d00h00m01s 2.6\n", wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := parseShowProc(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if st.master != tt.master {
				t.Errorf("master = %+v, want %+v", st.master, tt.master)
			}
			if !reflect.DeepEqual(st.workers, tt.workers) {
				t.Errorf("workers = %+v, want %+v", st.workers, tt.workers)
			}
		})
	}
}

func TestSingleCommand(t *testing.T) {
	for cmd, ok := range map[string]bool{
		"show info":                      true,
		"set server be/s1 state ready":   true,
		"":                               false,
		"   ":                            false,
		"show info; shutdown frontend x": false,
		"show info\nshow stat":           false,
		"show info\r":                    false,
		"show\x00info":                   false,
		"show\tinfo":                     false,
	} {
		if err := singleCommand(cmd); (err == nil) != ok {
			t.Errorf("singleCommand(%q) = %v, want ok=%v", cmd, err, ok)
		}
	}
}
