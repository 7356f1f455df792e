package render

import (
	"errors"
	"strings"
	"testing"

	"pier.dev/pier/internal/htpasswd"
	"pier.dev/pier/internal/model"
)

// Test users (python crypt, low bcrypt cost for speed): alice/s3cret
// (bcrypt), bob/hunter2 (SHA-512 crypt), carol/pw256 (SHA-256 crypt),
// dave/s3cret (alice's hash as htpasswd -B writes it, "$2y$").
const (
	aliceHash = "$2b$05$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	bobHash   = "$6$Ea1yNgy2jUg9amIr$h.OMJyaKB7QcQCFGkA52leL2i2SrycZ0WwA8tptjw7w5OOY81RkZMwE69n.wQh2Cs5nzhSPoquUgfXsgcnQN1/"
	carolHash = "$5$12C1iHnz82B7pN8Z$4R6Pzl3UaQSfz523zxmyGrGN5EtIsuGZzToVBOVsun2"
)

// fixtureSecrets are the basic-auth Secrets the fixtures name, as the
// agent would read them.
var fixtureSecrets = map[string]map[string][]byte{
	"ns/staff": {"auth": []byte("alice:" + aliceHash + "\nbob:" + bobHash + "\n")},
	"ns/ops":   {"carol": []byte(carolHash), "dave": []byte("$2y$" + aliceHash[4:] + "\n")},
	// htpasswd's default ($apr1$, checked in Lua) beside MD5-crypt and
	// bcrypt (checked by crypt(3)); hashes from openssl passwd -apr1 / -1.
	"ns/apache": {"auth": []byte("prom:$apr1$Zq3.x/Ab$M68YK0YO.mONLY/uwDkP60\n" +
		"long:$apr1$s$H.et6DDOD091qWnimmXBV.\n" +
		"erin:$1$md5salt$hIVFH61iJn483N1XvX7.U.\n" +
		"alice:" + aliceHash + "\n")},
}

func fixtureUsers(a model.BasicAuth) ([]htpasswd.User, error) {
	data, ok := fixtureSecrets[a.Namespace+"/"+a.Secret]
	if !ok {
		return nil, errors.New("not found")
	}
	return htpasswd.FromSecret(data, a.Type)
}

// basicAuth is the BasicAuth translation would record for a fixture Secret.
func basicAuth(realm, secret, typ string) *model.BasicAuth {
	users, err := htpasswd.FromSecret(fixtureSecrets["ns/"+secret], typ)
	if err != nil {
		panic(err)
	}
	return &model.BasicAuth{Realm: realm, Namespace: "ns", Secret: secret, Type: typ, SHA256: htpasswd.Digest(users)}
}

// authFixture: two profiles sharing the staff userlist (two realms), one
// with the ops userlist (auth-map), beside a route of the same host
// without basic auth.
func authFixture(web1, web2 model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(web1, hostIs("app.example"), pathPrefix("/admin")),
			model.PolicyOptions{BasicAuth: basicAuth("Staff only", "staff", htpasswd.TypeFile)}),
		with(toPool(web1, hostIs("app.example"), pathPrefix("/reports")),
			model.PolicyOptions{BasicAuth: basicAuth("Authentication Required - reports", "staff", htpasswd.TypeFile)}),
		with(toPool(web2, hostIs("app.example"), pathPrefix("/ops")),
			model.PolicyOptions{BasicAuth: basicAuth("Ops", "ops", htpasswd.TypeMap)}),
		toPool(web2, hostIs("app.example"), pathPrefix("/")),
	))}, web1, web2)
}

func TestBasicAuthRevalidated(t *testing.T) {
	web := pool("web", member("10.0.0.1", 80))
	render := func(a *model.BasicAuth, lookup UserLookup) error {
		lb := newLB([]model.Listener{httpListener("", routes(toPool(web, hostIs("a.example"), pathPrefix("/"))))}, web)
		lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{BasicAuth: a}
		opts := fixtureOptions()
		opts.Users = lookup
		_, err := Render(lb, lbAt(fixtureDir), nil, opts)
		return err
	}
	good := basicAuth("Staff", "staff", htpasswd.TypeFile)
	if err := render(good, fixtureUsers); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(a *model.BasicAuth){
		"realm quote":   func(a *model.BasicAuth) { a.Realm = "a\"b" },
		"realm evil":    func(a *model.BasicAuth) { a.Realm = "a;evil" },
		"realm newline": func(a *model.BasicAuth) { a.Realm = "a\nhttp-request deny" },
		"realm empty":   func(a *model.BasicAuth) { a.Realm = "" },
		"type":          func(a *model.BasicAuth) { a.Type = "auth-htpasswd" },
		"digest":        func(a *model.BasicAuth) { a.SHA256 = strings.Repeat("0", 64) },
		"digest syntax": func(a *model.BasicAuth) { a.SHA256 = "x;evil" },
		"missing":       func(a *model.BasicAuth) { a.Secret = "gone" },
	} {
		a := *good
		mutate(&a)
		if err := render(&a, fixtureUsers); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	if err := render(good, func(model.BasicAuth) ([]htpasswd.User, error) { return nil, nil }); err == nil {
		t.Error("no users: rendered")
	}
	// No lookup (the web view): an empty userlist, every request refused.
	lb := newLB([]model.Listener{httpListener("", routes(toPool(web, hostIs("a.example"), pathPrefix("/"))))}, web)
	lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{BasicAuth: good}
	r, err := Render(lb, lbAt(fixtureDir), nil, Options{Dir: fixtureDir})
	if err != nil || strings.Contains(string(r.Fragment), "password") || !strings.Contains(string(r.Fragment), "userlist ul_") {
		t.Errorf("without lookup: %v\n%s", err, r.Fragment)
	}
}
