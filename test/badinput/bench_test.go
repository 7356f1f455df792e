package badinput

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// bench is one `pier run` with the victim under load, shared by the rows.
type bench struct {
	p                           *harness.Pier
	manifests, state, tmp, home string
	vip                         string // the victim's VIP
	attackerPort                int    // echo backend of every attacker's "app" Service
	victimConf                  string
	victimBytes                 []byte
	victimText                  []byte          // all the victim's HAProxy loads: global.conf, process.conf, haproxy.conf
	baseline                    map[string]bool // paths under state, relative
	stopLoad                    context.CancelFunc
	results                     chan []harness.LoadResult
}

const (
	victimNS, victimHost = "victim", "victim.example"
	victimEcho           = "victim-app"   // what the victim's backend says it is
	attackerEcho         = "attacker-app" // what every attacker backend says it is
	loadPerClient        = 40             // requests per second per client
)

// startBench starts pier with its own empty TMPDIR and HOME on a folder
// holding the IngressClass and the victim, and puts the victim under load.
func startBench(t *testing.T) *bench {
	t.Helper()
	root := harness.ShortTempDir(t)
	b := &bench{manifests: harness.ShortTempDir(t), state: harness.ShortTempDir(t),
		tmp: filepath.Join(root, "tmp"), home: filepath.Join(root, "home")}
	for _, d := range []string{b.tmp, b.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	b.attackerPort = harness.StartEcho(t, attackerEcho, "attacker-pod")
	harness.WriteFile(t, filepath.Join(b.manifests, "00-class.json"), string(list(t, ingressClass())))
	victim := append(service(victimNS, "app", victimPort), ingress(victimNS, "victim", victimHost, "/"))
	harness.WriteFile(t, filepath.Join(b.manifests, "10-victim.json"), string(list(t, victim...)))

	b.p = harness.StartPier(t, harness.Options{Manifests: b.manifests, State: b.state,
		ExtraArgs: []string{"--log-format", "json", sharedConflict},
		Env:       []string{"TMPDIR=" + b.tmp, "HOME=" + b.home}})
	b.vip = b.p.Addresses(victimNS, "victim")[0]
	confs, _ := filepath.Glob(filepath.Join(b.state, "haproxy", "*", "haproxy.conf"))
	if len(confs) != 1 {
		t.Fatalf("want the victim's haproxy.conf alone, found %v", confs)
	}
	b.victimConf = confs[0]
	var err error
	if b.victimBytes, err = os.ReadFile(b.victimConf); err != nil {
		t.Fatal(err)
	}
	// The victim's process.conf is in its own folder with one process per
	// load balancer, in its shard's with shards (the default); every
	// shard's is taken, they differ only in their sockets.
	processConfs, _ := filepath.Glob(filepath.Join(b.state, "haproxy", "*", "process.conf"))
	if len(processConfs) == 0 {
		t.Fatal("no process.conf under the state dir")
	}
	for _, f := range append([]string{filepath.Join(b.state, "haproxy", "global.conf")}, processConfs...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.victimText = append(b.victimText, text...)
	}
	b.victimText = append(b.victimText, b.victimBytes...)
	b.baseline = b.entries(t)
	t.Logf("victim VIP %s, config %s, state entries %v", b.vip, b.victimConf, sortedSet(b.baseline))

	ctx, cancel := context.WithCancel(context.Background())
	b.stopLoad, b.results = cancel, make(chan []harness.LoadResult, 1)
	go func() { b.results <- harness.RunLoad(ctx, b.vip, b.p.HTTPPort, victimHost, "/", loadPerClient) }()
	t.Cleanup(cancel)
	return b
}

// finish stops the load and checks what the victim saw over the whole run.
func (b *bench) finish(t *testing.T, started time.Time) {
	t.Helper()
	b.stopLoad()
	for _, r := range <-b.results {
		t.Log(r)
		if r.Transport != 0 || r.Unexpected != 0 {
			t.Errorf("victim traffic failed: %s", r)
		}
		if r.Services[victimEcho] != r.Requests {
			t.Errorf("%s: %d requests but %d answers from %s: %v", r.Name, r.Requests, r.Services[victimEcho], victimEcho, r.Services)
		}
		if want := int(time.Since(started).Seconds()) * loadPerClient / 2; r.Requests < want {
			t.Errorf("%s: only %d requests, want at least %d: the load was lighter than claimed", r.Name, r.Requests, want)
		}
	}
	b.checkVictimUntouched(t)
	if n := b.victimApplies(t); n != 1 {
		t.Errorf("the victim's HAProxy was started or reloaded %d times over the whole run, want 1 (its start)", n)
	}
}

// entries lists every path under the state dir except pier's own log,
// which the harness keeps there.
func (b *bench) entries(t testing.TB) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(b.state, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a load balancer folder being removed right now
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.state, path)
		if rel == "." || path == b.p.LogPath || inShard(rel) {
			return nil // HAProxy processes' folders change with every reload
		}
		out[rel] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkEntries checks that the state dir holds the baseline plus the
// folders of exactly extraLBs other load balancers, and nothing else.
func (b *bench) checkEntries(t testing.TB, extraLBs int) {
	t.Helper()
	now := b.entries(t)
	victimDir := filepath.Base(filepath.Dir(b.victimConf))
	lbDirs := map[string]bool{}
	for e := range b.baseline {
		if !now[e] && !inShard(e) {
			t.Errorf("state entry %s disappeared", e)
		}
	}
	for e := range now {
		if b.baseline[e] || inShard(e) {
			continue
		}
		parts := strings.Split(e, string(filepath.Separator))
		if len(parts) < 2 || parts[0] != "haproxy" || parts[1] == victimDir {
			t.Errorf("unexpected state entry %s", e)
			continue
		}
		lbDirs[parts[1]] = true
	}
	if len(lbDirs) != extraLBs {
		t.Errorf("want %d load balancer folders besides the victim's, found %v", extraLBs, sortedSet(lbDirs))
	}
}

// inShard: a state entry of a shard's HAProxy process
// (haproxy/shard-<k>/...), whose load balancers may share it with the
// victim, or of the landing process (haproxy/landing/..., which new load
// balancers pass through): its sockets and checked config copies change
// with every reload an attacker's load balancer causes, which is the
// point of a shard. What belongs to a load balancer stays in the load
// balancer's folder.
func inShard(entry string) bool {
	parts := strings.Split(entry, string(filepath.Separator))
	return len(parts) >= 2 && parts[0] == "haproxy" && (strings.HasPrefix(parts[1], "shard-") || parts[1] == "landing")
}

// checkVictimUntouched checks the victim's config and pier's private
// TMPDIR and HOME.
func (b *bench) checkVictimUntouched(t testing.TB) {
	t.Helper()
	if got, err := os.ReadFile(b.victimConf); err != nil || string(got) != string(b.victimBytes) {
		t.Errorf("the victim's haproxy.conf changed (err %v):\n%s", err, got)
	}
	for _, d := range []string{b.tmp, b.home} {
		if des, err := os.ReadDir(d); err != nil || len(des) != 0 {
			t.Errorf("pier wrote outside its folders: %s holds %v (err %v)", d, des, err)
		}
	}
}

// checkMarkers fails if any marker occurs in a file under haproxy/ (all
// HAProxy input pier writes), or anywhere under state when everywhere.
func (b *bench) checkMarkers(t testing.TB, markers []string, everywhere bool) {
	t.Helper()
	for _, m := range markers {
		if strings.Contains(string(b.victimText), m) {
			t.Errorf("marker %q is in the victim's own config: it cannot tell an attack", m)
		}
	}
	root := filepath.Join(b.state, "haproxy")
	if everywhere {
		root = b.state
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("read %s: %v", path, err)
			return nil
		}
		for _, m := range markers {
			if strings.Contains(string(data), m) {
				t.Errorf("attacker text %q reached %s", m, path)
			}
		}
		return nil
	})
}

// reloads reads pier_haproxy_reloads_total by result.
// reloads are pier's HAProxy load counters; landed counts the new load
// balancers the landing process served before their shard's deferred
// reload loaded them.
type reloads struct{ started, ok, failed, landed float64 }

func (b *bench) reloads() reloads {
	m := "pier_haproxy_reloads_total"
	return reloads{b.p.Metric(m, `result="started"`), b.p.Metric(m, `result="ok"`), b.p.Metric(m, `result="failed"`),
		b.p.Metric("pier_haproxy_landings_total", `result="landed"`)}
}

// logLine is the part of pier's JSON log lines the tests read.
type logLine struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
	LB   string    `json:"lb"`
}

func (b *bench) logLines(t testing.TB) []logLine {
	t.Helper()
	f, err := os.Open(b.p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// victimApplies counts log lines saying the victim's HAProxy was started
// or reloaded.
func (b *bench) victimApplies(t testing.TB) int {
	n := 0
	for _, l := range b.logLines(t) {
		if l.LB == victimNS+"/victim" && (l.Msg == "haproxy running" || strings.Contains(l.Msg, "reloaded")) {
			n++
		}
	}
	return n
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
