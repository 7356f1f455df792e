// Package layout owns every path pier's HAProxy side uses below the state
// folder. Nothing else joins these names, so the folder has one
// description and one place that checks a UUID before it becomes a path:
//
//	<state>/haproxy/
//	  global.conf          process-level global and defaults (render.Global)
//	  access.sock          the agent's datagram socket every process logs requests to (package accesslog)
//	  shard-<k>/           a HAProxy process that packs several load balancers (Shard)
//	  <uuid>/              one load balancer (LB)
//	    haproxy.conf       its fragment: frontends and backends, names scoped to the uuid
//	    haproxy.conf.check a new fragment being checked alone before a shard loads it
//	    crt-list-<digest>  its TLS certificates by SNI
//	    certs/<id>-<digest>.pem  certificate and key, mode 0600
//	    certs/clientca-<digest>.pem  a listener's CA bundle for client certificates
//	    routes-<port>-<table>-<digest>.map  routing maps of listener <port> (render's routes.go)
//	    auth-<digest>.lua  the auth-url Lua action, when a profile uses it (render's extauth.go)
//
// The crt-list, certificate, map and Lua files are named by their content's digest:
// a new one never overwrites a file the last configuration that loaded
// reads, so when `haproxy -c` refuses a new set, a restart still finds
// every file of the last good one. The agent prunes the
// files no configuration reads once a new one has loaded.
//
//	slots.json         which member holds which server slot (sticky slots)
//
// A HAProxy process has a folder of its own (Process): its process.conf
// (a second global section with what differs per process: the runtime
// socket), haproxy.sock, and what package process keeps there (master
// socket, pid file, staged configurations). A load balancer that runs in
// a process of its own shares its folder (ProcessOf); a process that packs
// several load balancers (a shard) has its own folder (Shard).
package layout

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"

	"pier.dev/pier/internal/encode"
)

// Layout derives paths from the state folder.
type Layout struct {
	root string // <state>/haproxy
}

// maxSocketPath keeps room below sun_path's 108 bytes for the temporary
// name HAProxy binds first ("<path>.<pid>.tmp").
const maxSocketPath = 90

// New returns the layout below stateDir. It refuses a state folder whose
// socket paths would not fit a Unix socket, so a long --state-dir fails
// at start-up rather than at the first render.
func New(stateDir string) (Layout, error) {
	if stateDir == "" {
		return Layout{}, errors.New("layout: empty state dir")
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return Layout{}, fmt.Errorf("state dir %s: %w", encode.Printable(stateDir), err)
	}
	l := Layout{root: filepath.Join(abs, "haproxy")}
	probe := l.process(filepath.Join(l.root, "00000000-0000-0000-0000-000000000000"))
	if err := encode.FilePath(probe.Dir).Err(); err != nil {
		return Layout{}, fmt.Errorf("state dir %s: %w", encode.Printable(stateDir), err)
	}
	if n := len(probe.Socket()); n > maxSocketPath {
		return Layout{}, fmt.Errorf("state dir %s is too long: HAProxy socket paths below it would be %d bytes, the limit is %d (Unix sockets); use a shorter path",
			encode.Printable(stateDir), n, maxSocketPath)
	}
	return l, nil
}

// Root is <state>/haproxy.
func (l Layout) Root() string { return l.root }

// AccessLog is the datagram socket the agent reads access-log lines
// from; every HAProxy process sends to it. It is shorter than any
// process socket, which New checked.
func (l Layout) AccessLog() string { return filepath.Join(l.root, "access.sock") }

// Global is the process-level configuration every HAProxy loads first.
func (l Layout) Global() string { return filepath.Join(l.root, "global.conf") }

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ValidUUID reports whether s has a load balancer UUID's shape.
func ValidUUID(s string) bool { return uuidPattern.MatchString(s) }

// LB returns the paths of load balancer uuid. UUIDs are ours, but the
// store may be shared (a custom resource): check the shape and that the
// joined path stays where it belongs (the Dir/Base check of
// kubernetes/ingress-nginx#13068).
func (l Layout) LB(uuid string) (LB, error) {
	if !ValidUUID(uuid) {
		return LB{}, fmt.Errorf("load balancer uuid %s is not a UUID", encode.Printable(uuid))
	}
	dir := filepath.Join(l.root, uuid)
	if filepath.Dir(dir) != l.root || filepath.Base(dir) != uuid {
		return LB{}, fmt.Errorf("load balancer uuid %s escapes %s", encode.Printable(uuid), encode.Printable(l.root))
	}
	return LB{UUID: uuid, Dir: dir}, nil
}

// ProcessOf returns the process that runs load balancer lb. One process
// per load balancer, for now: its folder is the load balancer's.
func (l Layout) ProcessOf(lb LB) Process { return l.process(lb.Dir) }

// ShardPrefix starts the folder name of every shard process.
const ShardPrefix = "shard-"

// Shard returns the process folder of shard k (k >= 0).
func (l Layout) Shard(k int) Process {
	return l.process(filepath.Join(l.root, ShardPrefix+strconv.Itoa(k)))
}

// LandingDir names the landing process's folder (haproxydriver's
// landing.go): it is neither a load balancer's nor a shard's, so Recover
// leaves it alone.
const LandingDir = "landing"

// Landing returns the folder of the landing process, the one HAProxy per
// node that serves new load balancers until their shard loads them.
func (l Layout) Landing() Process { return l.process(filepath.Join(l.root, LandingDir)) }

// LandingMap is the path of one of the landing process's runtime maps
// (name: "vips", "lbs", "host.exact", ...). They start empty: the
// agent fills them through the runtime API.
func (p Process) LandingMap(name string) string { return filepath.Join(p.Dir, name+".map") }

func (l Layout) process(dir string) Process {
	return Process{Dir: dir, Global: l.Global()}
}

// LB is the folder of one load balancer.
type LB struct {
	UUID string
	Dir  string
}

// Config is the load balancer's fragment.
func (b LB) Config() string { return filepath.Join(b.Dir, "haproxy.conf") }

// Candidate is where a new fragment is written to be checked alone
// before it replaces Config: a shard reloads every fragment it packs, so
// one that `haproxy -c` refuses must never reach Config.
func (b LB) Candidate() string { return filepath.Join(b.Dir, "haproxy.conf.check") }

// CrtList is the load balancer's crt-list whose content has the hex
// digest (see the package comment).
func (b LB) CrtList(digest string) (string, error) {
	short, err := shortDigest(digest)
	if err != nil {
		return "", fmt.Errorf("crt-list: %w", err)
	}
	return filepath.Join(b.Dir, CrtListPrefix+short), nil
}

// CrtListPrefix starts the name of every crt-list file.
const CrtListPrefix = "crt-list-"

var digestPattern = regexp.MustCompile(`^[0-9a-f]{1,64}$`)

// shortDigest is the part of a hex digest a file name carries: 64 bits
// tell a load balancer's few versions apart.
func shortDigest(digest string) (string, error) {
	if !digestPattern.MatchString(digest) {
		return "", fmt.Errorf("digest %s is not lowercase hex", encode.Printable(digest))
	}
	return digest[:min(len(digest), 16)], nil
}

// RouteMap is one routing map of listener port whose content has the hex
// digest: table is render's name for it ("host.exact", "wildcard.prefix",
// ...; letters and one dot).
func (b LB) RouteMap(port int, table, digest string) (string, error) {
	short, err := shortDigest(digest)
	if err != nil {
		return "", fmt.Errorf("route map: %w", err)
	}
	return filepath.Join(b.Dir, RouteMapPrefix+strconv.Itoa(port)+"-"+table+"-"+short+".map"), nil
}

// AuthLua is the load balancer's Lua file for auth-url and
// custom-http-errors (render's external-auth and custom-errors actions)
// whose content has the hex digest.
func (b LB) AuthLua(digest string) (string, error) {
	short, err := shortDigest(digest)
	if err != nil {
		return "", fmt.Errorf("auth lua: %w", err)
	}
	return filepath.Join(b.Dir, AuthLuaPrefix+short+".lua"), nil
}

// AuthMap is the map file of a userlist's $apr1$ users (render's Apache
// MD5 check) whose content has the hex digest.
func (b LB) AuthMap(digest string) (string, error) {
	short, err := shortDigest(digest)
	if err != nil {
		return "", fmt.Errorf("auth map: %w", err)
	}
	return filepath.Join(b.Dir, AuthLuaPrefix+short+".map"), nil
}

// AuthLuaPrefix starts the name of every auth Lua file and auth map.
const AuthLuaPrefix = "auth-"

// RouteMapPrefix starts the name of every routing map file.
const RouteMapPrefix = "routes-"

// Slots is the record of which member holds which server slot.
func (b LB) Slots() string { return filepath.Join(b.Dir, "slots.json") }

// CertsDir holds the load balancer's certificate files.
func (b LB) CertsDir() string { return filepath.Join(b.Dir, "certs") }

// Cert is where certificate certID (PEM, key included) with content
// digest sha256 (hex) is written. certID must be one of pier's
// identifiers; the result is checked to stay inside the certs folder.
func (b LB) Cert(certID, sha256 string) (string, error) {
	if err := encode.ID("", certID).Err(); err != nil {
		return "", fmt.Errorf("certificate id: %w", err)
	}
	short, err := shortDigest(sha256)
	if err != nil {
		return "", fmt.Errorf("certificate %s: %w", encode.Printable(certID), err)
	}
	certs := b.CertsDir()
	name := certID + "-" + short + ".pem"
	p := filepath.Join(certs, name)
	if filepath.Dir(p) != certs || filepath.Base(p) != name {
		return "", fmt.Errorf("certificate id %s escapes the certs folder", encode.Printable(certID))
	}
	return p, nil
}

// UpstreamCA is where a CA bundle for verifying members (ca-file) with
// content digest sha256 is written, in the certs folder: named by the
// digest alone, so pools trusting the same CA share one file.
func (b LB) UpstreamCA(sha256 string) (string, error) {
	short, err := shortDigest(sha256)
	if err != nil {
		return "", fmt.Errorf("upstream CA: %w", err)
	}
	return filepath.Join(b.CertsDir(), "ca-"+short+".pem"), nil
}

// ClientCA is where a CA bundle for verifying TLS clients (a listener's
// ca-file) with content digest sha256 is written, in the certs folder,
// named by the digest alone.
func (b LB) ClientCA(sha256 string) (string, error) {
	short, err := shortDigest(sha256)
	if err != nil {
		return "", fmt.Errorf("client CA: %w", err)
	}
	return filepath.Join(b.CertsDir(), "clientca-"+short+".pem"), nil
}

// UpstreamClient is where a client certificate for members (crt, key
// included) with content digest sha256 is written, in the certs folder.
func (b LB) UpstreamClient(sha256 string) (string, error) {
	short, err := shortDigest(sha256)
	if err != nil {
		return "", fmt.Errorf("upstream client certificate: %w", err)
	}
	return filepath.Join(b.CertsDir(), "client-"+short+".pem"), nil
}

// Process is the folder of one HAProxy process.
type Process struct {
	Dir    string
	Global string // the shared global.conf, loaded first
}

// Conf is the process's own global section (process.conf).
func (p Process) Conf() string { return filepath.Join(p.Dir, "process.conf") }

// Socket is the process's runtime API socket.
func (p Process) Socket() string { return filepath.Join(p.Dir, "haproxy.sock") }

// Files lists what the process loads, in order: global.conf, its
// process.conf, then the fragment of each load balancer it runs.
func (p Process) Files(lbs ...LB) []string {
	out := []string{p.Global, p.Conf()}
	for _, b := range lbs {
		out = append(out, b.Config())
	}
	return out
}

// CheckSocket reports whether the process's socket path fits.
func (p Process) CheckSocket() error {
	if n := len(p.Socket()); n > maxSocketPath {
		return fmt.Errorf("socket path is %d bytes, the limit is %d: use a shorter state folder", n, maxSocketPath)
	}
	return nil
}
