// Package web is pier's read-only web view of the load balancers: an
// overview (one row per load balancer, filtered on the server so it works
// with JavaScript off), a detail page per load balancer (the Octavia tree,
// addresses, placement and per-node reports, the rendered haproxy.conf,
// the problems of its Ingresses), an Ingress view, and a Gateway view
// (Gateways with their listeners and conditions, the HTTPRoutes attached
// and those refused, with reasons).
//
// Everything is server-rendered with html/template, whose contextual
// escaping is the only way a user value reaches a page: none of its
// "trusted content" string types is ever used (safety_test.go checks the
// sources). Strings are also passed through Clean, which makes
// bidirectional and invisible formatting characters visible, so a name
// cannot pretend to be another on screen. Assets are embedded; the page
// works without JavaScript, and with it polls its own live part once a
// second (an ETag over the data, so an unchanged page costs a 304) and
// replaces it in place.
//
// The view only reads: GET and HEAD are served, every other method gets
// 405. Secrets never reach it: load balancers carry certificate
// references and hashes, not key material, and Ingresses carry none.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/store"
)

// IngressInfo is one Ingress as the web view shows it: a copy whose
// status.loadBalancer holds what pier published, and its problems.
type IngressInfo = pipeline.IngressState

// Ingresses lists the Ingresses pier knows, with their problems. pier run
// serves them from its in-memory view, the controller from its informer
// cache.
type Ingresses interface {
	// Ingresses returns nil when the Ingresses are not known here (a
	// standby controller replica runs no informers), an empty list when
	// there are none.
	Ingresses() []IngressInfo
}

// Handler serves the web view. Mount it at "/" (exact) and "/ui/".
type Handler struct {
	// Store is read, never written: a store.Mirror in a process that has
	// one.
	Store store.Reader
	// Ingresses may be nil: the pages then show load balancers only and
	// say that Ingresses are not available.
	Ingresses Ingresses
	// Gateways may be nil: the Gateway pages then say that Gateways are
	// not available.
	Gateways Gateways
	// Config renders a load balancer's haproxy.conf for the detail page;
	// nil shows "not available in this mode".
	Config func(lb *model.LoadBalancer) ([]byte, error)
	Logger *slog.Logger
	// Now is the clock for ages; nil means time.Now.
	Now func() time.Time
	// PageSize is the number of overview rows per page; 0 means
	// DefaultPageSize.
	PageSize int

	routes sync.Once
	mux    *http.ServeMux
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// partHeader asks for the live part of a page only (the script's polls).
const partHeader = "X-Pier-Part"

var pages = parsePages()

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{"short": short}
	base := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"overview", "lb", "ingresses", "ingress", "gateways", "gateway", "httproute", "notfound"} {
		t := template.Must(base.Clone())
		out[name] = template.Must(t.ParseFS(templateFS, "templates/"+name+".html"))
	}
	return out
}

// ServeHTTP routes the view.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	secure(w.Header())
	h.routes.Do(func() { h.mux = h.newMux() })
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", h.overview)
	mux.HandleFunc("/ui/{$}", h.overview)
	mux.HandleFunc("/ui/lb/{uuid}", h.loadBalancer)
	mux.HandleFunc("/ui/ingresses", h.ingressList)
	mux.HandleFunc("/ui/ingress/{namespace}/{name}", h.ingress)
	mux.HandleFunc("/ui/gateways", h.gatewayList)
	mux.HandleFunc("/ui/gateway/{namespace}/{name}", h.gateway)
	mux.HandleFunc("/ui/httproute/{namespace}/{name}", h.httpRoute)
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("/ui/static/", http.StripPrefix("/ui/static/", staticHandler(static)))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		h.notFound(w, r)
	})
	return mux
}

// secure sets the headers that keep the page a page: no inline or foreign
// script even if an escaping bug let markup through, no framing, no
// sniffing, no referrer to elsewhere.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "+
		"img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

func staticHandler(root fs.FS) http.Handler {
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listing
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// live is what every page model provides: its ETag is a hash of the data
// of its live part, ages excluded (they are recomputed by the script), so
// a poll of an unchanged page is answered 304.
type live interface{ etagSource() any }

func etag(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

// page renders a whole page, or only its live part when the script asks.
func (h *Handler) page(w http.ResponseWriter, r *http.Request, code int, name string, data live) {
	tag := etag(data.etagSource())
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("Vary", partHeader)
	partOnly := r.Header.Get(partHeader) == "live"
	if partOnly && tag != "" {
		hdr.Set("ETag", tag)
		if r.Header.Get("If-None-Match") == tag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	tmpl, exec := pages[name], "page"
	if partOnly {
		exec = "live"
	}
	var arg any = struct {
		Data any
		ETag string
	}{data, tag}
	if partOnly {
		arg = data
	}
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, exec, arg); err != nil {
		h.logger().Error("web page failed", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// notFound answers 404 with the page that names the path asked for.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.page(w, r, http.StatusNotFound, "notfound", &notFoundPage{Title: "Not found", Path: Clean(r.URL.Path)})
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrNotFound) {
		h.notFound(w, r)
		return
	}
	h.logger().Error("web view: store read failed", "error", err)
	http.Error(w, "the store could not be read: see pier's log", http.StatusServiceUnavailable)
}

type notFoundPage struct {
	Title string
	Path  string
}

func (p *notFoundPage) etagSource() any { return p }

// Clean makes a user string safe to look at, not only safe to parse:
// html/template escapes markup, and Clean replaces bidirectional
// overrides, isolates, zero-width and other invisible format characters
// and C0/C1 controls with a visible ‹U+XXXX›, so "admin\u202Egnp.exe"
// cannot display as something it is not.
func Clean(s string) string {
	if !needsCleaning(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if invisible(r) {
			fmt.Fprintf(&b, "‹U+%04X›", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func needsCleaning(s string) bool {
	for _, r := range s {
		if invisible(r) {
			return true
		}
	}
	return false
}

func invisible(r rune) bool {
	switch {
	case r < 0x20 && r != '\n' && r != '\t', r >= 0x7f && r < 0xa0:
		return true
	case r == 0xad, r == 0x061c, r == 0x180e, r == 0xfeff:
		return true
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2060 && r <= 0x206f:
		return true
	case r >= 0xfff9 && r <= 0xfffb:
		return true
	}
	return false
}

// short abbreviates a hash for display; the full value is in the title.
func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
