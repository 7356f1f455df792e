package rawhttp

// haproxy_2_6_12_1_deb12u4 is Debian bookworm's HAProxy. Its deb12u1
// backports refuse an empty Content-Length (CVE-2023-40225) and '#' in
// the request target (CVE-2023-45539), which upstream 2.6.12 accepts. Regenerate a table for a new
// version from the failing test's output, and review every changed row.
var haproxy_2_6_12_1_deb12u4 = map[string]pinned{
	// Control bytes. NUL and every control byte but HTAB in a header value
	// get 400 from pier's req.hdrs guard (frontend.go); HAProxy 2.6 itself
	// forwards them (before the guard covered more than NUL, the backend
	// read "x-a: a\x01b"). A NUL in a chunked request's trailer still
	// reaches the backend: rules never see trailers (raw-nul-trailer).
	"nul-in-header-value":      {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"nul-in-header-name":       {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"nul-in-uri":               {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"ctl-in-header-value":      {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"vt-in-header-value":       {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"del-in-header-value":      {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"tab-in-header-value":      {status: "200", answers: 1, forwarded: true, backend: 1, view: "X-A=[\"a\\tb\"]"},
	"obs-text-in-header-value": {status: "200", answers: 1, forwarded: true, backend: 1, view: "X-A=[\"a\\xffb\"]"},
	"nul-in-trailer":           {status: "200", answers: 1, forwarded: true, backend: 1, view: "X-T=[] raw-nul-trailer=true"},
	"bare-cr-in-header-value":  {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"lf-only-line-endings":     {status: "200", answers: 1, forwarded: true, backend: 1, view: ""},
	"obs-fold":                 {status: "200", answers: 1, forwarded: true, backend: 1, view: "X-A=[\"a   b\"]"},

	// Framing. Ambiguous lengths are refused; with both Content-Length and
	// Transfer-Encoding, chunked wins, Content-Length is dropped and the
	// connection is closed after the answer, so the bytes after the last
	// chunk are never read as a request, keep-alive or not.
	"duplicate-content-length-different":              {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"duplicate-content-length-same":                   {status: "200", answers: 1, forwarded: true, backend: 1, view: "\"abcd\""},
	"empty-content-length":                            {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"content-length-and-transfer-encoding":            {status: "200", answers: 1, forwarded: true, backend: 1, view: "\"\""},
	"content-length-and-transfer-encoding-keep-alive": {status: "200", answers: 1, forwarded: true, backend: 1, view: ""},
	"transfer-encoding-in-http-1.0":                   {status: "200", answers: 1, forwarded: true, backend: 1, view: "\"\""},
	"invalid-chunk-size":                              {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"transfer-encoding-chunked-identity":              {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"transfer-encoding-space-before-colon":            {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"smuggled-request-in-body":                        {status: "200", answers: 1, forwarded: true, backend: 1, view: "74 body bytes"},

	// Header syntax and limits (tune.bufsize 16384, tune.http.maxhdr 101).
	"header-without-colon": {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"space-before-colon":   {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"oversized-header":     {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"too-many-headers":     {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"duplicate-host":       {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},

	// Request line. An absolute-form target must agree with Host, so pier's
	// host routing and the backend see one host; a request without Host
	// matches no host rule (404).
	"invalid-method-characters":           {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"request-line-extra-spaces":           {status: "200", answers: 1, forwarded: true, backend: 1, view: "uri=/c/request-line-extra-spaces/ host=victim.example"},
	"http-0.9":                            {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"http-1.0-without-host":               {status: "404", answers: 1, forwarded: false, backend: 0, view: ""},
	"http-1.1-without-host":               {status: "400", answers: 1, forwarded: false, backend: 0, view: ""}, // pier: RFC 9112 3.2
	"absolute-form-same-host":             {status: "200", answers: 1, forwarded: true, backend: 1, view: "uri=http://victim.example/c/absolute-form-same-host/ host=victim.example"},
	"absolute-form-authority-is-victim":   {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"absolute-form-host-header-is-victim": {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"fragment-in-uri":                     {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},

	// Slowloris: timeout http-request (1s here) answers 408.
	"slow-client": {status: "408", answers: 1, forwarded: false, backend: 0, view: ""},

	// pier's routing and hardening. Routing compares the raw path, so
	// "//admin", "/x/../admin" and "/%61dmin" would pass a rule for /admin
	// and reach a backend that may normalise them to /admin: pier answers
	// 400 to them (http-request normalize-uri, which could rewrite them
	// instead, is experimental in 2.6). One trailing dot of the Host is
	// the same host.
	"pier-reject-policy":          {status: "403", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-reject-double-slash":    {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-reject-dot-segment":     {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-reject-percent-encoded": {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	// Where a rule is scoped to a path, the look-alikes Java servers and
	// IIS read as that path are refused too: ";" (path parameters, so
	// "/admin;x" and "/x/..;/admin" are "/admin" to Tomcat), a backslash
	// (a "/" to IIS), and "%25", "%3b", "%5c" (decoded twice, or by a backend
	// that splits on what they encode).
	"pier-reject-path-parameter":       {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-reject-dot-dot-parameter":    {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-reject-backslash":            {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-reject-double-encoded":       {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-reject-encoded-semicolon":    {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-reject-encoded-backslash":    {status: "400", answers: 1, forwarded: false, backend: 0, view: ""},
	"pier-underscore-header-dropped":   {status: "200", answers: 1, forwarded: true, backend: 1, view: "X_Forwarded_Proto=[] X-Forwarded-Proto=[\"http\"]"},
	"pier-forwarded-proto-overwritten": {status: "200", answers: 1, forwarded: true, backend: 1, view: "X-Forwarded-Proto=[\"http\"]"},
	"pier-host-case-and-port":          {status: "200", answers: 1, forwarded: true, backend: 1, view: ""},
	"pier-host-trailing-dot":           {status: "200", answers: 1, forwarded: true, backend: 1, view: ""},
}
