package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/rosterdb/roster/service"
)

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in, name, secret string
		err              bool
	}{
		{"alice=s3cret", "alice", "s3cret", false},
		{"ops.bob@example.com=x=y", "ops.bob@example.com", "x=y", false},
		{"s3cret", "operator", "s3cret", false},
		{"=abc=", "operator", "=abc=", false},           // no name before '=': a bare secret
		{"9lives=abc", "operator", "9lives=abc", false}, // not a name: a bare secret
		{"alice=", "", "", true},
		{"", "", "", true},
	} {
		got, err := parseToken(tc.in)
		if (err != nil) != tc.err || (!tc.err && (got.Name != tc.name || got.Secret != tc.secret)) {
			t.Errorf("parseToken(%q) = %+v, %v; want %s/%s (error %v)", tc.in, got, err, tc.name, tc.secret, tc.err)
		}
	}
}

// Actions need a token even on loopback; tokens must differ by name and by
// secret; a refusal starts nothing.
func TestServeActionsRefusals(t *testing.T) {
	f := seed(t)
	t.Setenv("ROSTER_TOKEN", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--actions"}, "refusing to offer --actions without --token"},
		{[]string{"--actions", "--addr", "127.0.0.1:0"}, "refusing to offer --actions without --token"},
		{[]string{"--token", "alice=first-secret", "--token", "alice=second-secret"}, `two tokens are named "alice"`},
		{[]string{"--token", "alice=first-secret", "--token", "bob=first-secret"}, "have the same secret"},
		{[]string{"--token", "alice="}, "empty secret"},
	} {
		code, out, errOut := runCLI(t, append([]string{"serve", "--db", f.path}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Contains(out, "serving") {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// Without --actions the page offers no form, every POST is 403 and the
// database (opened read-only) is left as it was.
func TestServeWithoutActions(t *testing.T) {
	f := seed(t)
	failed, stop := addFailureAndLeader(t, f.path)
	stop()
	before, err := os.ReadFile(f.path)
	must(t, err)
	for _, token := range []string{"", "alice=s3cret"} {
		args := []string{"--db", f.path}
		bearer := ""
		if token != "" {
			args, bearer = append(args, "--token", token), "s3cret"
		}
		base := startServe(t, args...)
		for _, path := range []string{"/", "/executions/" + failed.String()} {
			code, body := get(t, base+path, bearer)
			if code != 200 || strings.Contains(body, `method="post"`) || strings.Contains(body, "csrf") {
				t.Fatalf("%s without --actions: %d, offers a form:\n%s", path, code, body)
			}
		}
		if code, _ := get(t, base+"/actions", bearer); code != 404 {
			t.Fatalf("/actions without --actions: %d, want 404", code)
		}
		for _, path := range []string{"/actions/retry", "/actions/cancel", "/actions/bulk", "/actions/pause", "/", "/api/status"} {
			code, body := post(t, http.DefaultClient, base+path, bearer, url.Values{"id": {failed.String()}, "namespace": {"ns"}, "lane": {"f"}})
			if code != 403 {
				t.Fatalf("POST %s without --actions (token %q): %d, want 403\n%s", path, token, code, body)
			}
		}
	}
	after, err := os.ReadFile(f.path)
	must(t, err)
	if string(before) != string(after) {
		t.Fatal("a POST changed the database of a server without --actions")
	}
}

// post sends a form, with a bearer token when one is given, and returns the
// answer's status and body (redirects are the client's business).
func post(t *testing.T, c *http.Client, u, bearer string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf reads the CSRF token out of a page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	return m[1]
}

// actionServer serves the pages with actions over f's database, for the
// tokens alice=a-secret and bob=b-secret, logging the actions into log.
func actionServer(t *testing.T, path string, log io.Writer) (*service.Store, string) {
	t.Helper()
	s, err := service.Open(context.Background(), path)
	must(t, err)
	t.Cleanup(func() { _ = s.Close() })
	sess := newSessions()
	h := newStatusHandler(s, path, time.Minute, sess)
	h.enableActions(slog.New(slog.NewTextHandler(log, nil)))
	tokens := []operatorToken{{Name: "alice", Secret: "a-secret"}, {Name: "bob", Secret: "b-secret"}}
	srv := httptest.NewServer(requireToken(tokens, sess, h.mux, "/healthz"))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func state(t *testing.T, s *service.Store, id uuid.UUID) service.Execution {
	t.Helper()
	e, err := s.GetExecution(context.Background(), id)
	must(t, err)
	return e
}

// TestServeActions: every action needs a token and its actor's CSRF token
// (403 and nothing changed without it, or with another's), does what it
// says, answers with its outcome, and is logged and kept in the history
// under the token's name; a browser's session from /login acts the same.
func TestServeActions(t *testing.T) {
	f := seed(t)
	failed, stop := addFailureAndLeader(t, f.path)
	stop()
	var log syncBuffer
	s, base := actionServer(t, f.path, &log)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	must(t, s.PutLaneLimits(context.Background(), service.LaneLimits{Namespace: "other", Lane: "q", MaxRunning: 3, Paused: true}))

	_, alicePage := get(t, base+"/actions", "a-secret")
	_, bobPage := get(t, base+"/", "b-secret")
	aliceCSRF, bobCSRF := csrfOf(t, alicePage), csrfOf(t, bobPage)
	if aliceCSRF == bobCSRF {
		t.Fatal("alice and bob have one CSRF token")
	}
	retry := url.Values{"id": {failed.String()}}
	for _, tc := range []struct {
		name, bearer, csrf string
		want               int
	}{
		{"no token", "", aliceCSRF, 401},
		{"a wrong token", "nope", aliceCSRF, 401},
		{"no CSRF token", "a-secret", "", 403},
		{"a wrong CSRF token", "a-secret", "forged", 403},
		{"bob's CSRF token", "a-secret", bobCSRF, 403},
	} {
		form := url.Values{"id": retry["id"]}
		if tc.csrf != "" {
			form.Set("csrf", tc.csrf)
		}
		if code, body := post(t, noRedirect, base+"/actions/retry", tc.bearer, form); code != tc.want {
			t.Fatalf("retry with %s: %d, want %d\n%s", tc.name, code, tc.want, body)
		}
		if e := state(t, s, failed); e.State != service.ExecutionFailed {
			t.Fatalf("retry with %s changed the execution: %s", tc.name, e.State)
		}
	}
	if strings.Contains(log.String(), "action") {
		t.Fatalf("a refused request was logged as an action:\n%s", log.String())
	}

	// Done with the right one (as a form field or a header).
	code, body := post(t, noRedirect, base+"/actions/retry", "a-secret", url.Values{"id": {failed.String()}, "csrf": {aliceCSRF}, "back": {"/executions/" + failed.String()}})
	if code != 200 || !strings.Contains(body, `id="outcome" data-code="200"`) || !strings.Contains(body, "waiting again") || !strings.Contains(body, `href="/executions/`+failed.String()+`"`) {
		t.Fatalf("retry: %d\n%s", code, body)
	}
	if e := state(t, s, failed); e.State != service.ExecutionWaiting {
		t.Fatalf("retried execution: %s", e.State)
	}
	req, _ := http.NewRequest("POST", base+"/actions/cancel", strings.NewReader(url.Values{"id": {f.waiting.String()}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer b-secret")
	req.Header.Set("X-CSRF-Token", bobCSRF)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	_ = resp.Body.Close()
	if e := state(t, s, f.waiting); resp.StatusCode != 200 || e.State != service.ExecutionCancelled || e.LastError != "cancelled by bob from roster serve" {
		t.Fatalf("cancel: %d, %s %q", resp.StatusCode, e.State, e.LastError)
	}
	// Refused by the Store: the answer says so, with its status, and the
	// history keeps it.
	for _, tc := range []struct {
		path string
		form url.Values
		want int
	}{
		{"/actions/retry", url.Values{"id": {f.running.String()}}, 409}, // running: only failed or cancelled ones
		{"/actions/retry", url.Values{"id": {uuid.New().String()}}, 404},
		{"/actions/retry", url.Values{"id": {"not-an-id"}}, 400},
		{"/actions/resume", url.Values{"namespace": {"ns"}, "lane": {"z"}}, 404}, // has no limits
		{"/actions/bulk", url.Values{"op": {"delete"}, "namespace": {"ns"}, "state": {"waiting"}}, 400},
		{"/actions/bulk", url.Values{"op": {"cancel"}, "namespace": {"ns"}, "state": {"failed"}}, 400},
		{"/actions/bulk", url.Values{"op": {"cancel"}, "state": {"waiting"}}, 400},
		{"/actions/pause", url.Values{"namespace": {"ns"}, "lane": {""}}, 400},
		{"/actions/resume", url.Values{"namespace": {""}, "lane": {"q"}}, 400}, // not "every namespace"
		{"/actions/retry", url.Values{"id": {f.scheduled.String()}}, 409},      // waiting: nothing to retry
	} {
		tc.form.Set("csrf", aliceCSRF)
		code, body := post(t, noRedirect, base+tc.path, "a-secret", tc.form)
		if code != tc.want {
			t.Fatalf("%s %v: %d, want %d\n%s", tc.path, tc.form, code, tc.want, body)
		}
		if tc.want != 200 && !strings.Contains(body, "refused: ") {
			t.Fatalf("%s %v: the outcome does not say it was refused\n%s", tc.path, tc.form, body)
		}
	}

	// Lane q of another namespace was left alone.
	if limits, err := s.ListLaneLimits(context.Background(), "other"); err != nil || len(limits) != 1 || !limits[0].Paused {
		t.Fatalf("other/q: %+v, %v", limits, err)
	}
	// Pause and resume keep the lane's other limits.
	must(t, s.PutLaneLimits(context.Background(), service.LaneLimits{Namespace: "ns", Lane: "x,y", MaxRunning: 7}))
	for _, tc := range []struct {
		path   string
		paused bool
	}{{"/actions/pause", true}, {"/actions/pause", true}, {"/actions/resume", false}} {
		if code, body := post(t, noRedirect, base+tc.path, "a-secret", url.Values{"namespace": {"ns"}, "lane": {"x,y"}, "csrf": {aliceCSRF}}); code != 200 {
			t.Fatalf("%s: %d\n%s", tc.path, code, body)
		}
		limits, err := s.ListLaneLimits(context.Background(), "ns")
		must(t, err)
		if len(limits) != 1 || limits[0].Paused != tc.paused || limits[0].MaxRunning != 7 {
			t.Fatalf("after %s: %+v", tc.path, limits)
		}
	}

	// The history: newest first, by whom, in the JSON and on the page; and
	// every action on the server's log.
	code, body = get(t, base+"/api/status", "a-secret")
	var st struct {
		Actions []actionRecord `json:"actions"`
	}
	must(t, json.Unmarshal([]byte(body), &st))
	if code != 200 || len(st.Actions) != 15 {
		t.Fatalf("history: %d, %d actions\n%s", code, len(st.Actions), body)
	}
	first, last := st.Actions[len(st.Actions)-1], st.Actions[0]
	if first.Seq != 1 || first.Who != "alice" || !first.OK || first.What != "retry execution "+failed.String() ||
		st.Actions[len(st.Actions)-2].Who != "bob" || last.Seq != 15 || last.What != "resume lane x,y of namespace ns" || time.Since(last.At) > time.Minute {
		t.Fatalf("history: first %+v, last %+v", first, last)
	}
	for _, rec := range st.Actions {
		if rec.OK == strings.HasPrefix(rec.Outcome, "refused: ") {
			t.Fatalf("history: %+v", rec)
		}
	}
	for _, want := range []string{`who=alice what="retry execution ` + failed.String() + `" outcome="waiting again" ok=true`, `who=bob what="cancel execution ` + f.waiting.String(), `level=WARN`} {
		if !strings.Contains(log.String(), want) {
			t.Fatalf("the log misses %q:\n%s", want, log.String())
		}
	}
	if _, page := get(t, base+"/", "a-secret"); strings.Count(page, `<tr class="action`) != historyOnStatus || !strings.Contains(page, `data-seq="15"`) {
		t.Fatalf("the status page's history:\n%s", page)
	}

	// A browser logs in with a token: a session cookie (HttpOnly,
	// SameSite=Strict), its own CSRF token, and actions under the token's
	// name; a wrong token is 401; after logout the cookie is worth nothing.
	if code, body := post(t, noRedirect, base+"/login", "", url.Values{"token": {"wrong"}}); code != 401 || !strings.Contains(body, "not one of this server") {
		t.Fatalf("login with a wrong token: %d\n%s", code, body)
	}
	for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {"Origin": "https://evil.example"}} {
		req, _ := http.NewRequest("POST", base+"/login", strings.NewReader("token=b-secret"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		must(t, err)
		_ = resp.Body.Close()
		if resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
			t.Fatalf("a login from another site's page (%v): %d, cookies %v", h, resp.StatusCode, resp.Cookies())
		}
	}
	// Behind a proxy that rewrites Host, the browser's own say (same-origin)
	// is what counts.
	req, _ = http.NewRequest("POST", base+"/login", strings.NewReader("token=b-secret"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", "https://roster.example.com")
	resp, err = noRedirect.Do(req)
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a same-origin login behind a proxy: %d", resp.StatusCode)
	}
	jar, err := cookiejar.New(nil)
	must(t, err)
	browser := &http.Client{Jar: jar}
	resp, err = browser.PostForm(base+"/login", url.Values{"token": {"b-secret"}})
	must(t, err)
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	u, _ := url.Parse(base)
	cookies := jar.Cookies(u)
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/" || len(cookies) != 1 || cookies[0].Name != sessionCookie {
		t.Fatalf("login: %d at %s, cookies %v", resp.StatusCode, resp.Request.URL, cookies)
	}
	sessionCSRF := csrfOf(t, string(page))
	if sessionCSRF == bobCSRF {
		t.Fatal("a session has its bearer token's CSRF token")
	}
	if code, _ := post(t, browser, base+"/actions/pause", "", url.Values{"namespace": {"ns"}, "lane": {"z"}, "csrf": {bobCSRF}}); code != 403 {
		t.Fatalf("a session's POST with the bearer's CSRF token: %d, want 403", code)
	}
	if code, body := post(t, browser, base+"/actions/pause", "", url.Values{"namespace": {"ns"}, "lane": {"z"}, "csrf": {sessionCSRF}}); code != 200 || !strings.Contains(body, `data-lane="ns/z"`) {
		t.Fatalf("a session's pause: %d\n%s", code, body)
	}
	if !strings.Contains(log.String(), `who=bob what="pause lane z of namespace ns"`) {
		t.Fatalf("the session's action is not bob's:\n%s", log.String())
	}
	if code, _ := post(t, browser, base+"/logout", "", url.Values{"csrf": {sessionCSRF}}); code != 401 { // the redirect to / needs a login again
		t.Fatalf("logout: %d", code)
	}
	req, _ = http.NewRequest("GET", base+"/", nil)
	req.AddCookie(cookies[0])
	resp, err = http.DefaultClient.Do(req)
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("the session's cookie after logout: %d", resp.StatusCode)
	}
}

// TestServeBulkActions: a filtered action counts first and asks for a
// confirmation showing how many; confirmed, it acts on those that match
// then and says how many it skipped.
func TestServeBulkActions(t *testing.T) {
	f := seed(t)
	var log syncBuffer
	s, base := actionServer(t, f.path, &log)
	ctx := context.Background()
	var ids []uuid.UUID
	for range 5 {
		id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "bulk"})
		must(t, err)
		ids = append(ids, id)
	}
	_, page := get(t, base+"/actions", "a-secret")
	csrf := csrfOf(t, page)
	filter := url.Values{"op": {"cancel"}, "namespace": {"ns"}, "lane": {"bulk"}, "state": {"waiting"}, "csrf": {csrf}}
	code, body := post(t, http.DefaultClient, base+"/actions/bulk", "a-secret", filter)
	if code != 200 || !strings.Contains(body, `id="confirm" data-matching="5"`) || !strings.Contains(body, `name="confirm" value="5"`) {
		t.Fatalf("count: %d\n%s", code, body)
	}
	for _, id := range ids {
		if state(t, s, id).State != service.ExecutionWaiting {
			t.Fatal("counting changed an execution")
		}
	}
	// One changes state between the count and the confirmation, and two
	// more arrive: the confirmed action takes the counted that still match,
	// no more.
	must(t, s.CancelExecution(ctx, service.CancelExecutionArgs{ID: ids[0], Reason: "by hand"}))
	var later []uuid.UUID
	for range 2 {
		id, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "bulk"})
		must(t, err)
		later = append(later, id)
	}
	filter.Set("confirm", "5")
	filter.Set("upto", regexp.MustCompile(`name="upto" value="([^"]+)"`).FindStringSubmatch(body)[1])
	code, body = post(t, http.DefaultClient, base+"/actions/bulk", "a-secret", filter)
	if code != 200 || !strings.Contains(body, "cancelled 4 of the 5 confirmed; 1 skipped: their state changed meanwhile") {
		t.Fatalf("confirmed: %d\n%s", code, body)
	}
	for _, id := range ids[1:] {
		if e := state(t, s, id); e.State != service.ExecutionCancelled || e.LastError != "cancelled by alice from roster serve" {
			t.Fatalf("after the confirmed cancel: %s %q", e.State, e.LastError)
		}
	}
	for _, id := range append(later, f.scheduled) {
		if e := state(t, s, id); e.State != service.ExecutionWaiting {
			t.Fatalf("one the confirmation did not count: %s", e.State)
		}
	}
	// A confirmation for fewer than match takes that many, the oldest.
	code, body = post(t, http.DefaultClient, base+"/actions/bulk", "a-secret", url.Values{"op": {"retry"}, "namespace": {"ns"}, "state": {"cancelled"}, "csrf": {csrf},
		"confirm": {"2"}, "upto": {ids[4].String()}})
	if code != 200 || !strings.Contains(body, "retried 2 of the 2 confirmed") || state(t, s, ids[1]).State != service.ExecutionWaiting || state(t, s, ids[2]).State != service.ExecutionCancelled {
		t.Fatalf("retry 2: %d\n%s", code, body)
	}
	// A confirmation without its count or its last id is refused.
	for _, bad := range []url.Values{{"confirm": {"0"}, "upto": {ids[4].String()}}, {"confirm": {"x"}, "upto": {ids[4].String()}}, {"confirm": {"2"}}} {
		form := url.Values{"op": {"retry"}, "namespace": {"ns"}, "state": {"cancelled"}, "csrf": {csrf}}
		for k, v := range bad {
			form[k] = v
		}
		if code, body := post(t, http.DefaultClient, base+"/actions/bulk", "a-secret", form); code != 400 {
			t.Fatalf("confirmation %v: %d\n%s", bad, code, body)
		}
	}
	if state(t, s, ids[2]).State != service.ExecutionCancelled {
		t.Fatal("a refused confirmation acted")
	}
	// Nothing matches: the confirmation says so and offers nothing.
	code, body = post(t, http.DefaultClient, base+"/actions/bulk", "a-secret", url.Values{"op": {"retry"}, "namespace": {"ns"}, "lane": {"bulk"}, "state": {"failed"}, "csrf": {csrf}})
	if code != 200 || !strings.Contains(body, `data-matching="0"`) || strings.Contains(body, `id="confirm-button"`) {
		t.Fatalf("nothing matching: %d\n%s", code, body)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/executions/x": "/executions/x", "/actions": "/actions", "": "/", "//evil.example/": "/",
		"https://evil.example/": "/", "/\\evil": "/", "javascript:alert(1)": "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// The actions in a real headless Chromium, as an operator takes them: log
// in through the form, retry a failed execution and cancel a waiting one
// from their pages, cancel a lane's waiting work after the confirmation
// that counts it, pause a lane from the status page and resume it from the
// actions page; the database changes each time, and the history shows it.
func TestServeActionsInABrowser(t *testing.T) {
	exe := chromium(t)
	f := seed(t)
	failed, stop := addFailureAndLeader(t, f.path)
	stop()
	ctx0 := context.Background()
	s, err := service.Open(ctx0, f.path)
	must(t, err)
	defer s.Close()
	var bulk []uuid.UUID
	for range 3 {
		id, err := s.CreateExecution(ctx0, service.CreateExecutionArgs{Namespace: "ns", Lane: "bulk"})
		must(t, err)
		bulk = append(bulk, id)
	}
	base := startServe(t, "--db", f.path, "--actions", "--token", "alice=a-long-secret", "--refresh", "60s")
	ctx := newBrowser(t, exe, 1400, 1000)
	text := func(css string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
		must(t, err)
		return strings.TrimSpace(v)
	}
	outcome := func(what string) {
		t.Helper()
		must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#outcome`))))
		if code, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#outcome").dataset.code`)); err != nil || code != "200" {
			t.Fatalf("%s: outcome %q (%v): %s", what, code, err, text(`#outcome`))
		}
	}

	// The page asks for the token, and the login form trades it for a session.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#login`)),
		chromedp.SendKeys(chromedp.CSS(`#login input[name="token"]`), "a-long-secret"),
		chromedp.Submit(chromedp.CSS(`#login input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[data-namespace="ns"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#actions-link`)),
	))
	// The browser's own POST without the CSRF token, or with a forged one,
	// is refused and changes nothing, though it carries the session.
	for _, body := range []string{"id=" + failed.String(), "id=" + failed.String() + "&csrf=forged"} {
		code, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/actions/retry", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "`+body+`"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
		must(t, err)
		if code != 403 || state(t, s, failed).State != service.ExecutionFailed {
			t.Fatalf("the browser's POST %q: %d, execution %s", body, code, state(t, s, failed).State)
		}
	}
	// Retry the failure from its page; back there, it can be cancelled.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/executions/"+failed.String()),
		chromedp.Click(chromedp.CSS(`#retry`)),
	))
	outcome("retry")
	if r := text(`#outcome .result`); r != "waiting again" || state(t, s, failed).State != service.ExecutionWaiting {
		t.Fatalf("retry: %q, %s", r, state(t, s, failed).State)
	}
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#back`)), chromedp.WaitVisible(chromedp.CSS(`#cancel`))))
	if st := text(`#execution td.state`); st != "waiting" {
		t.Fatalf("back on the execution's page: %q", st)
	}
	// Cancel a waiting one from its page.
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/executions/"+f.waiting.String()), chromedp.Click(chromedp.CSS(`#cancel`))))
	outcome("cancel")
	if e := state(t, s, f.waiting); e.State != service.ExecutionCancelled || e.LastError != "cancelled by alice from roster serve" {
		t.Fatalf("cancel: %s %q", e.State, e.LastError)
	}
	// Cancel a lane's waiting work: counted first, then confirmed.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/actions"),
		chromedp.SetValue(chromedp.CSS(`#bulk select[name="op"]`), "cancel"),
		chromedp.SetValue(chromedp.CSS(`#bulk select[name="state"]`), "waiting"),
		chromedp.SendKeys(chromedp.CSS(`#bulk input[name="namespace"]`), "ns"),
		chromedp.SendKeys(chromedp.CSS(`#bulk input[name="lane"]`), "bulk"),
		chromedp.Click(chromedp.CSS(`#count-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
	))
	if n := text(`#confirm .matching`); n != "3" {
		t.Fatalf("the confirmation counts %q, want 3", n)
	}
	for _, id := range bulk {
		if state(t, s, id).State != service.ExecutionWaiting {
			t.Fatal("the count changed the lane's work")
		}
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, err)
	if shot := os.Getenv("ROSTER_SCREENSHOT_CONFIRM"); shot != "" { // docs/confirm.png
		must(t, os.WriteFile(shot, png, 0o644))
	}
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm-button`))))
	outcome("filtered cancel")
	for _, id := range bulk {
		if e := state(t, s, id); e.State != service.ExecutionCancelled {
			t.Fatalf("after the confirmed cancel: %s", e.State)
		}
	}
	// Pause lane z from its row on the status page; resume it from the
	// actions page's paused lanes.
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.Click(chromedp.CSS(`section[data-namespace="ns"] tr[data-lane="z"] button.pause`))))
	outcome("pause")
	paused := func() bool {
		limits, err := s.ListLaneLimits(ctx0, "ns")
		must(t, err)
		return len(limits) == 1 && limits[0].Lane == "z" && limits[0].Paused
	}
	if !paused() {
		t.Fatal("lane z is not paused")
	}
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`section[data-namespace="ns"] tr[data-lane="z"] button.resume`))))
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/actions"), chromedp.Click(chromedp.CSS(`tr.paused-lane[data-lane="ns/z"] button.resume`))))
	outcome("resume")
	if paused() {
		t.Fatal("lane z is still paused")
	}
	// The status page's history: the latest actions, newest first, by alice.
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#history`))))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#history tr.action")].map(e => e.querySelector(".who").innerText + ": " + e.querySelector(".what").innerText)`))
	must(t, err)
	want := []string{"alice: resume lane z of namespace ns", "alice: pause lane z of namespace ns",
		"alice: cancel every waiting execution of namespace ns, lane bulk", "alice: cancel execution " + f.waiting.String(), "alice: retry execution " + failed.String()}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, err)
	if shot := os.Getenv("ROSTER_SCREENSHOT_ACTIONS"); shot != "" { // docs/actions.png
		must(t, os.WriteFile(shot, png, 0o644))
	}
}

// Without --actions a browser still logs in to see a page behind a token,
// and logs out; it is offered no action.
func TestServeLoginWithoutActions(t *testing.T) {
	f := seed(t)
	base := startServe(t, "--db", f.path, "--token", "alice=long-secret")
	jar, err := cookiejar.New(nil)
	must(t, err)
	browser := &http.Client{Jar: jar}
	resp, err := browser.PostForm(base+"/login", url.Values{"token": {"long-secret"}})
	must(t, err)
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `id="logout"`) || strings.Contains(string(page), `action="/actions`) {
		t.Fatalf("logged in: %d\n%s", resp.StatusCode, page)
	}
	if code, _ := post(t, browser, base+"/logout", "", url.Values{"csrf": {"forged"}}); code != 403 {
		t.Fatalf("logout with a forged CSRF token: %d", code)
	}
	if code, _ := post(t, browser, base+"/logout", "", url.Values{"csrf": {csrfOf(t, string(page))}}); code != 401 {
		t.Fatalf("logout: %d, want the login form (401)", code)
	}
	resp, err = browser.Get(base + "/")
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
}
