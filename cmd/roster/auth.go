package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// operatorToken is one --token: the name its holder's actions are logged
// under, and the secret a request carries as its bearer token.
type operatorToken struct{ Name, Secret string }

// defaultTokenName names a --token given as a bare secret.
const defaultTokenName = "operator"

// tokenNameRE is what a token's NAME may be.
var tokenNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.@-]{0,63}$`)

// parseToken reads one --token: NAME=SECRET, or a bare SECRET (named
// operator). A secret that itself holds '=' must be given as NAME=SECRET.
func parseToken(v string) (operatorToken, error) {
	if v == "" {
		return operatorToken{}, fmt.Errorf("empty token")
	}
	if name, secret, ok := strings.Cut(v, "="); ok && tokenNameRE.MatchString(name) {
		if secret == "" {
			return operatorToken{}, fmt.Errorf("token %q has an empty secret", name)
		}
		return operatorToken{Name: name, Secret: secret}, nil
	}
	return operatorToken{Name: defaultTokenName, Secret: v}, nil
}

// tokenFlag is --token, which may be given several times; every secret is
// one the CLI's errors never show.
type tokenFlag struct {
	c    *cli
	list *[]operatorToken
}

func (f tokenFlag) String() string { return "" }

func (f tokenFlag) Set(v string) error {
	t, err := parseToken(v)
	if err != nil {
		return err
	}
	f.c.secrets = append(f.c.secrets, t.Secret)
	for _, o := range *f.list {
		switch {
		case o.Name == t.Name:
			return fmt.Errorf("two tokens are named %q: name each one (NAME=SECRET)", t.Name)
		case o.Secret == t.Secret:
			return fmt.Errorf("tokens %q and %q have the same secret", o.Name, t.Name)
		}
	}
	*f.list = append(*f.list, t)
	return nil
}

// sessionCookie names the cookie of a browser that logged in with a token.
const sessionCookie = "roster_session"

// sessionTTL is how long a login lasts; maxSessions bounds the logins held.
const (
	sessionTTL  = 12 * time.Hour
	maxSessions = 1024
)

// sessions are the browsers logged in, each with the token's name, held in
// memory: restarting roster serve logs every browser out.
type sessions struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]session
}

type session struct {
	name    string
	expires time.Time
}

func newSessions() *sessions { return &sessions{now: time.Now, m: map[string]session{}} }

// start logs name in and returns the session's id.
func (s *sessions) start(name string) string {
	id := randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) >= maxSessions {
		oldest := ""
		for k, v := range s.m {
			if !v.expires.After(now) {
				delete(s.m, k)
			} else if oldest == "" || v.expires.Before(s.m[oldest].expires) {
				oldest = k
			}
		}
		if len(s.m) >= maxSessions {
			delete(s.m, oldest)
		}
	}
	s.m[id] = session{name: name, expires: now.Add(sessionTTL)}
	return id
}

// lookup returns the name a live session logged in with.
func (s *sessions) lookup(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if !ok || !v.expires.After(s.now()) {
		delete(s.m, id)
		return "", false
	}
	return v.name, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// actor is who a request comes from: the name of the token it carries (as a
// bearer token, or through a session that logged in with it), and the
// session, if any.
type actor struct{ Name, Session string }

type actorKey struct{}

// actorOf is the request's actor; without tokens, nobody (an empty name).
func actorOf(r *http.Request) actor {
	a, _ := r.Context().Value(actorKey{}).(actor)
	return a
}

// gate lets through the requests that carry a token, as a bearer token or
// as a session cookie from /login. With no token every request passes.
type gate struct {
	tokens   []operatorToken
	sessions *sessions
	open     []string // paths a GET or HEAD may take without the token (see tokenless)
	next     http.Handler
}

// requireToken answers 401 to every request without one of the tokens
// (none: every request passes), but /login (where a browser trades a token
// for a session) and a GET or HEAD of one of the open paths, which is served
// without it and marked as such (see tokenless).
func requireToken(tokens []operatorToken, sess *sessions, next http.Handler, open ...string) http.Handler {
	if len(tokens) == 0 {
		return next
	}
	return &gate{tokens: tokens, sessions: sess, open: open, next: next}
}

// named returns the name of the token whose secret is s (constant time over
// every token).
func (g *gate) named(s string) (string, bool) {
	name := ""
	for _, t := range g.tokens {
		if subtle.ConstantTimeCompare([]byte(s), []byte(t.Secret)) == 1 {
			name = t.Name
		}
	}
	return name, name != ""
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/login" {
		g.login(w, r)
		return
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if name, ok := g.named(bearer); ok {
			g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, actor{Name: name})))
			return
		}
	} else if c, err := r.Cookie(sessionCookie); err == nil {
		if name, ok := g.sessions.lookup(c.Value); ok {
			g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, actor{Name: name, Session: c.Value})))
			return
		}
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && slices.Contains(g.open, r.URL.Path) {
		g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenlessKey{}, true)))
		return
	}
	unauthorized(w, r, "")
}

var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>roster: log in</title></head>
<body style="font-family: system-ui, sans-serif; margin: 3rem">
<h1>roster</h1>
<p>This page needs a token (<code>roster serve --token</code>): send it as a bearer token, or log in here.</p>
{{if .}}<p id="login-error" style="color: #b00">{{.}}</p>{{end}}
<form id="login" method="post" action="/login"><input type="password" name="token" aria-label="token" autocomplete="current-password" size="40" autofocus> <button type="submit">log in</button></form>
</body></html>
`))

// unauthorized answers 401; a browser (which asks for HTML) gets the login
// form in the body.
func unauthorized(w http.ResponseWriter, r *http.Request, why string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="roster"`)
	w.Header().Set("Cache-Control", "no-store")
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_ = loginPage.Execute(w, why)
		return
	}
	http.Error(w, "401 unauthorized: a bearer token is required", http.StatusUnauthorized)
}

// login shows the login form (GET) or trades a token for a session cookie
// (POST): HttpOnly and SameSite=Strict, so that no other site's page sends
// it, and then back to the status page.
func (g *gate) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		unauthorized(w, r, "")
		return
	case http.MethodPost:
	default:
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if crossSite.Check(r) != nil { // another site's form must not log this browser in under its token
		http.Error(w, "roster: 403 forbidden: a login from another site's page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	name, ok := g.named(r.PostFormValue("token"))
	if !ok {
		r.Header.Set("Accept", "text/html")
		unauthorized(w, r, "That is not one of this server's tokens.")
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		g.sessions.end(c.Value) // a new login ends the browser's last session
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: g.sessions.start(name), Path: "/",
		MaxAge: int(sessionTTL.Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// maxFormBytes bounds a POST's form.
const maxFormBytes = 64 << 10

// csrf is a server's key for the CSRF tokens of its forms: a session's
// token is the key's MAC of the session, a bearer client's of its token's
// name. Another site's page can neither read it nor send the session's
// cookie (SameSite=Strict) or a bearer token.
type csrf []byte

func newCSRF() csrf { return csrf(randomToken()) }

// token is the CSRF token of r's actor.
func (k csrf) token(r *http.Request) string {
	a := actorOf(r)
	m := hmac.New(sha256.New, k)
	if a.Session != "" {
		m.Write([]byte("session\x00" + a.Session))
	} else {
		m.Write([]byte("bearer\x00" + a.Name))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// valid reports whether r carries its actor's CSRF token (the form's csrf
// field, or the X-CSRF-Token header).
func (k csrf) valid(r *http.Request) bool {
	got := r.PostFormValue("csrf")
	if got == "" {
		got = r.Header.Get("X-CSRF-Token")
	}
	return got != "" && hmac.Equal([]byte(got), []byte(k.token(r)))
}

// checked reads a POST's form (at most maxFormBytes) and reports whether it
// carries its actor's CSRF token; if not, it has answered 400 (a form it
// cannot read) or 403, and nothing may be read or changed.
func (k csrf) checked(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "roster: 400 bad request: "+err.Error(), http.StatusBadRequest)
		return false
	}
	if !k.valid(r) {
		http.Error(w, "roster: 403 forbidden: the form's CSRF token is missing or wrong (reload the page and try again)", http.StatusForbidden)
		return false
	}
	return true
}

// logout ends the browser's session (a POST with its CSRF token).
func (h *statusHandler) logout(w http.ResponseWriter, r *http.Request) {
	if !h.csrf.checked(w, r) {
		return
	}
	if s := actorOf(r).Session; s != "" {
		h.sessions.end(s)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// crossSite refuses what a browser sent from another site's page: by its
// Sec-Fetch-Site, else by an Origin that is not this server's host (the
// standard library's CrossOriginProtection; a request from no browser, with
// neither header, passes).
var crossSite = http.NewCrossOriginProtection()
