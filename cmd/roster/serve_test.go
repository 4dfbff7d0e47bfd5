package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/rosterdb/roster/service"
)

// startServe runs 'roster serve' on a free loopback port and returns its
// base URL; the server stops when the test ends.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), pw, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v", err)
	}
	m := regexp.MustCompile(`on (http://\S+)/`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve: %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	})
	return m[1]
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

func TestServeEndpoints(t *testing.T) {
	f := seed(t)
	before, err := os.ReadFile(f.path)
	must(t, err)
	base := startServe(t, "--db", f.path)
	code, body := get(t, base+"/healthz", "")
	if code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	code, body = get(t, base+"/api/status", "")
	var st status
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Namespaces) != 2 || st.Agents["running"] != 2 {
		t.Fatalf("/api/status: %d\n%s", code, body)
	}
	if ns := st.Namespaces[0]; ns.Namespace != "ns" || ns.WorkersLapsed != 2 || ns.ExpiredLeases != 1 || len(ns.Expired) != 1 || len(ns.Lanes) != 2 {
		t.Fatalf("namespace ns: %+v", ns)
	}
	if len(st.Schedules) != 1 || st.Schedules[0].Name != "nightly" || st.Leader != "" || st.LeaderUntil != nil || st.Namespaces[0].Failures == nil {
		t.Fatalf("schedules %+v, leader %q %v, failures %v", st.Schedules, st.Leader, st.LeaderUntil, st.Namespaces[0].Failures)
	}
	code, body = get(t, base+"/metrics", "")
	if code != 200 || !strings.Contains(body, `roster_workers{namespace="ns",state="lapsed"} 2`) || !strings.Contains(body, `roster_agents{state="running"} 2`) {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	// Only what serve can know: the fleet's gauges, none of a working
	// process's counters or histograms (they would read 0 for ever).
	for _, absent := range []string{"roster_leases_lost_total", "roster_reclaims_total", "roster_commit_seconds", "roster_write_queue_wait_seconds", "roster_overloads_total"} {
		if strings.Contains(body, absent) {
			t.Fatalf("/metrics exports %s, which serve never moves:\n%s", absent, body)
		}
	}
	code, body = get(t, base+"/", "")
	for _, want := range []string{`data-namespace="ns"`, `data-namespace="other"`, `data-lane="z"`, f.running.String(), "http-equiv=\"refresh\""} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/: %d, missing %q", code, want)
		}
	}
	code, body = get(t, base+"/static/style.css", "")
	if code != 200 || !strings.Contains(body, ".bar") {
		t.Fatalf("/static/style.css: %d", code)
	}
	after, err := os.ReadFile(f.path)
	must(t, err)
	if string(before) != string(after) {
		t.Fatal("serve changed the database")
	}
}

func TestServeToken(t *testing.T) {
	f := seed(t)
	base := startServe(t, "--db", f.path, "--token", "s3cret")
	// /healthz says only whether the database answers: no token needed.
	if code, body := get(t, base+"/healthz", ""); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz without the token: %d %q", code, body)
	}
	guarded := startServe(t, "--db", f.path, "--token", "s3cret", "--token-healthz")
	if code, _ := get(t, guarded+"/healthz", ""); code != 401 {
		t.Fatalf("/healthz without the token, --token-healthz: %d", code)
	}
	if code, _ := get(t, guarded+"/healthz", "s3cret"); code != 200 {
		t.Fatalf("/healthz with the token, --token-healthz: %d", code)
	}
	for _, path := range []string{"/", "/api/status", "/metrics", "/static/style.css"} {
		if code, _ := get(t, base+path, ""); code != 401 {
			t.Fatalf("%s without the token: %d", path, code)
		}
		if code, _ := get(t, base+path, "wrong"); code != 401 {
			t.Fatalf("%s with a wrong token: %d", path, code)
		}
		if code, _ := get(t, base+path, "s3cret"); code != 200 {
			t.Fatalf("%s with the token: %d", path, code)
		}
	}
	// Any address but loopback needs a token; the refusal starts nothing.
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		code, _, errOut := runCLI(t, "serve", "--db", f.path, "--addr", addr)
		if code != 2 || !strings.Contains(errOut, "without --token") {
			t.Fatalf("serve --addr %s: %d %s", addr, code, errOut)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "0.0.0.0:1": false, "10.0.0.1:1": false, ":1": false} {
		if got, err := isLoopback(addr); err != nil || got != want {
			t.Fatalf("isLoopback(%s) = %v, %v", addr, got, err)
		}
	}
	h := requireToken([]operatorToken{{Name: "operator", Secret: "t"}}, newSessions(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokenless(r) {
			w.WriteHeader(299)
			return
		}
		w.WriteHeader(204)
	}), "/healthz")
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/", "", 401},
		{"GET", "/", "t", 204},
		{"GET", "/healthz", "", 299}, // served, marked tokenless
		{"HEAD", "/healthz", "", 299},
		{"GET", "/healthz", "t", 204},
		{"POST", "/healthz", "", 401}, // only reads are open
		{"GET", "/healthz/x", "", 401},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want || (tc.want == 401 && rec.Header().Get("WWW-Authenticate") == "") {
			t.Errorf("%s %s token %q: %d, want %d", tc.method, tc.path, tc.token, rec.Code, tc.want)
		}
	}
}

// chromium finds the browser for the page test: Debian's chromium package
// (.ci/run installs it). Locally without it the test skips; CI never does.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI must run the browser test: no chromium on PATH")
	}
	t.Skip("no chromium on PATH: apt-get install -y chromium to run the browser test")
	return ""
}

// newBrowser starts a headless Chromium of its own (ended with the test)
// with a window of width×height, and returns its context, which times out
// after browserBudget.
func newBrowser(t *testing.T, exe string, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, browserBudget)
	t.Cleanup(cancelTimeout)
	return ctx
}

// browserBudget bounds a browser test as a whole: a guard against a page
// that hangs, not a measure of speed. The longest test takes about 11 s on
// an idle machine, and took over 90 s under CI, with every package's tests
// running beside it under the race detector.
const browserBudget = 5 * time.Minute

// The status page in a real headless Chromium: what a person sees, and a
// change in the database shown after the page refreshes itself.
func TestServePageInABrowser(t *testing.T) {
	exe := chromium(t)
	f := seed(t)
	failed, stopLeader := addFailureAndLeader(t, f.path)
	defer stopLeader()
	base := startServe(t, "--db", f.path, "--refresh", "1s")

	ctx := newBrowser(t, exe, 1400, 900)
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`section[data-namespace="ns"]`)),
	))
	text := func(css string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
		must(t, err)
		return strings.TrimSpace(v)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	must(t, err)
	namespaces, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("section.namespace h2")].map(e => e.innerText)`))
	must(t, err)
	barWidth, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('section[data-namespace="ns"] tr[data-lane="z"] .bar .ready')).width`))
	must(t, err)
	nsText := text(`section[data-namespace="ns"] .summary`)
	laneReady := text(`section[data-namespace="ns"] tr[data-lane="z"] .ready-count`)
	laneScheduled := text(`section[data-namespace="ns"] tr[data-lane="z"] .scheduled-count`)
	runningAgents := text(`li[data-state="running"] .count`)
	expired := text(`section[data-namespace="ns"] .expired-leases`)
	if !strings.Contains(title, "roster") || strings.Join(namespaces, ",") != "ns,other" {
		t.Fatalf("title %q, namespaces %v", title, namespaces)
	}
	if !strings.Contains(nsText, "2 lapsed") || !strings.Contains(nsText, "1 expired leases") {
		t.Fatalf("namespace summary: %q", nsText)
	}
	if laneReady != "1" || laneScheduled != "1" || barWidth == "0px" || barWidth == "" {
		t.Fatalf("lane z: ready %q scheduled %q, ready bar width %q", laneReady, laneScheduled, barWidth)
	}
	if runningAgents != "2" || !strings.Contains(expired, f.running.String()) {
		t.Fatalf("agents running %q; expired leases: %q", runningAgents, expired)
	}
	// The throughput chart of lane f: its two completions and its failure
	// in this minute, as bars with their counts; lane z's ready count, as a
	// sample of this page.
	if done, failedN := text(`tr.chart[data-lane="ns/f"] .completed-count`), text(`tr.chart[data-lane="ns/f"] .failed-count`); done != "2" || failedN != "1" {
		t.Fatalf("lane f's chart: %q completed, %q failed; want 2 and 1", done, failedN)
	}
	shapes, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[
		document.querySelectorAll('tr.chart[data-lane="ns/f"] svg rect.completed').length,
		document.querySelectorAll('tr.chart[data-lane="ns/f"] svg rect.failed').length,
		document.querySelector('tr.chart[data-lane="ns/f"] svg rect.completed').getBoundingClientRect().height,
		document.querySelector('tr.chart[data-lane="ns/f"] svg rect.failed').getBoundingClientRect().height,
		document.querySelectorAll('tr.chart[data-lane="ns/z"] svg circle.ready-dot').length]`))
	must(t, err)
	if shapes[0] != 1 || shapes[1] != 1 || shapes[2] < shapes[3]*2-1 || shapes[2] > shapes[3]*2+1 || shapes[4] < 1 {
		t.Fatalf("chart shapes [completed bars, failed bars, completed height, failed height, ready dots of z] = %v", shapes)
	}
	if legend := text(`#throughput .legend`); !strings.Contains(legend, "full height: 3") {
		t.Fatalf("the charts' scale: %q", legend)
	}
	// Lane z has ready work and no alive worker claims from it: flagged,
	// with its count of workers (0); lane x,y, whose only workers lapsed,
	// has nothing ready: not flagged.
	if row := text(`section[data-namespace="ns"] tr[data-lane="z"]`); !strings.Contains(row, "no worker") ||
		text(`section[data-namespace="ns"] tr[data-lane="z"] .workers-count`) != "0" {
		t.Fatalf("lane z, unserved: %q", row)
	}
	if flagged, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.lane.unserved")].map(e => e.dataset.lane)`)); err != nil || strings.Join(flagged, ",") != "z" {
		t.Fatalf("flagged lanes %v, %v; want z", flagged, err)
	}
	// Bars share one scale: lane z (2 of the busiest lane's 2) is full, lane
	// x,y (1 running) half as long; the legend says so.
	widths, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`["z", "x,y"].map(l => [...document.querySelectorAll('section[data-namespace="ns"] tr[data-lane="' + l + '"] .bar span')].reduce((w, e) => w + e.getBoundingClientRect().width, 0)).concat([document.querySelector('section[data-namespace="ns"] tr[data-lane="z"] .bar').getBoundingClientRect().width])`))
	must(t, err)
	if len(widths) != 3 || widths[0] < widths[2]-2 || widths[1] < widths[0]/2-2 || widths[1] > widths[0]/2+2 {
		t.Fatalf("bar lengths of z and x,y, and a full bar: %v, want full and half", widths)
	}
	// Every lane table fits its card.
	if over, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll("section.namespace")].some(s => s.scrollWidth > s.clientWidth + 1)`)); err != nil || over {
		t.Fatalf("a namespace card overflows (%v)", err)
	}
	if legend := text(`section[data-namespace="ns"] .legend .scale`); !strings.Contains(legend, "2 executions") {
		t.Fatalf("the bars' scale: %q", legend)
	}
	// A zero count is drawn as zero, not in an alarm colour; a lapsed
	// worker count above zero is.
	colours, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
		getComputedStyle(document.querySelector('section[data-namespace="other"] .summary .lapsed')).color,
		getComputedStyle(document.querySelector('section[data-namespace="other"] .summary .expired')).color,
		getComputedStyle(document.querySelector('section[data-namespace="other"] .summary')).color,
		getComputedStyle(document.querySelector('section[data-namespace="ns"] .summary .lapsed')).color]`))
	must(t, err)
	if colours[0] != colours[2] || colours[1] != colours[2] || colours[3] == colours[2] {
		t.Fatalf("colours: 0 lapsed %s, 0 expired %s, the summary %s, 2 lapsed %s", colours[0], colours[1], colours[2], colours[3])
	}
	// The header names the maintenance leader; the Schedules card lists
	// the schedule; the namespace shows its latest failure; the bars have
	// a legend.
	if leader := text(`#leader`); !strings.Contains(leader, "maintenance leader: page-sweeper") {
		t.Fatalf("header: %q", leader)
	}
	if row := text(`tr[data-schedule="ns/nightly"]`); !strings.Contains(row, "every 24h0m0s") || !strings.Contains(row, "reports") || !strings.Contains(row, "UTC") {
		t.Fatalf("schedules card: %q", row)
	}
	if row := text(`section[data-namespace="ns"] tr.failure`); !strings.Contains(row, failed.String()) || !strings.Contains(row, "disk full") {
		t.Fatalf("latest failures: %q", row)
	}
	if legend := text(`section[data-namespace="ns"] .legend`); !strings.Contains(legend, "ready") || !strings.Contains(legend, "scheduled") || !strings.Contains(legend, "running") {
		t.Fatalf("legend: %q", legend)
	}
	// Heartbeats are hidden until asked for.
	kinds := func() []string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.event td:nth-child(5)")].map(e => e.innerText)`))
		must(t, err)
		return v
	}
	if k := kinds(); len(k) == 0 || slices.Contains(k, "heartbeat") {
		t.Fatalf("events by default: %v", k)
	}
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#heartbeat-toggle`)), chromedp.WaitVisible(chromedp.CSS(`#events`))))
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(kinds(), "heartbeat") {
		if time.Now().After(deadline) {
			t.Fatalf("heartbeats not shown after the toggle: %v", kinds())
		}
		time.Sleep(50 * time.Millisecond)
	}
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`section[data-namespace="ns"]`))))

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, err)
	shot := os.Getenv("ROSTER_SCREENSHOT") // where to keep it; by default an artifact out of the repo
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "status.png")
	}
	must(t, os.WriteFile(shot, png, 0o644))

	// A change in the database shows after the page refreshes itself.
	s, err := service.Open(context.Background(), f.path)
	must(t, err)
	_, err = s.RegisterWorker(context.Background(), service.RegisterWorkerArgs{Namespace: "fresh", WorkerID: "w", InstanceID: "new-worker", TTL: time.Hour})
	must(t, err)
	must(t, s.Close())
	must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`section[data-namespace="fresh"]`))))
	if instance := text(`section[data-namespace="fresh"] tr.worker td`); instance != "new-worker" {
		t.Fatalf("after the refresh: %q", instance)
	}

	// Agents with their host and holder, filtered by host through the form.
	if ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.agent")].map(e => e.dataset.agent + " " + e.querySelector(".host").innerText)`)); err != nil || strings.Join(ids, ",") != "ag1 host-ag1,ag2 host-ag2" {
		t.Fatalf("agents listed: %v (%v)", ids, err)
	}
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`form.agent-filter input[name="agent_host"]`), "host-ag2"),
		chromedp.Submit(chromedp.CSS(`form.agent-filter input[name="agent_host"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents`)),
	))
	deadline = time.Now().Add(10 * time.Second)
	for {
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.agent")].map(e => e.dataset.agent)`))
		must(t, err)
		if strings.Join(ids, ",") == "ag2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agents on host-ag2: %v", ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// An execution's page, reached from the latest failures: its fields and
	// its attempt history.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`section[data-namespace="ns"] tr.failure a`)),
		chromedp.Click(chromedp.CSS(`section[data-namespace="ns"] tr.failure a`)),
		chromedp.WaitVisible(chromedp.CSS(`#execution`)),
	))
	if id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#execution").dataset.execution`)); err != nil || id != failed.String() {
		t.Fatalf("the failure's link opened %q (%v), want %s", id, err, failed)
	}
	if state, lastErr := text(`#execution td.state`), text(`#execution .fields td.error`); state != "failed" || lastErr != "disk full" {
		t.Fatalf("execution page: state %q, last error %q", state, lastErr)
	}
	if row := text(`#execution tr.attempt`); !strings.Contains(row, "c") || !strings.Contains(row, "failed") || !strings.Contains(row, "disk full") {
		t.Fatalf("the attempt: %q", row)
	}
	// Without --actions no action is offered (no form posts, no button on
	// the failure's page), and the browser's POST is refused with nothing
	// changed.
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('form[method="post"], #retry, #cancel, button.pause').length`)); err != nil || n != 0 {
		t.Fatalf("the read-only page offers %d action forms (%v)", n, err)
	}
	for _, path := range []string{"/actions/retry", "/actions/cancel", "/"} {
		code, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("`+path+`", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "id=`+failed.String()+`"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
		must(t, err)
		if code != 403 {
			t.Fatalf("the browser's POST %s without --actions: %d", path, code)
		}
	}
	// The search form opens an execution by id.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`form.search input`)),
		chromedp.SendKeys(chromedp.CSS(`form.search input`), f.waiting.String()),
		chromedp.Submit(chromedp.CSS(`form.search input`)),
		chromedp.WaitVisible(chromedp.CSS(`#execution[data-execution="`+f.waiting.String()+`"]`)),
	))
	if state := text(`#execution td.state`); state != "waiting" {
		t.Fatalf("the searched execution: state %q", state)
	}
}

// addFailureAndLeader gives the seeded fleet a failed execution (a worker
// that heartbeats, then fails its work) and a maintenance leader, held by a
// RunSweeper until stop is called.
func addFailureAndLeader(t *testing.T, path string) (failed uuid.UUID, stop func()) {
	t.Helper()
	ctx := context.Background()
	s, err := service.Open(ctx, path)
	must(t, err)
	_, err = s.RegisterWorker(ctx, service.RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "c", Lanes: []string{"f"}, TTL: time.Hour})
	must(t, err)
	_, err = s.HeartbeatWorker(ctx, service.HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "c"})
	must(t, err)
	failed, err = s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "f"})
	must(t, err)
	l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "c", LeaseTTL: time.Minute})
	must(t, err)
	must(t, s.FailExecution(ctx, service.FailArgs{Lease: l, Reason: "disk full"}))
	for range 2 { // and two completions of the lane, for its chart
		_, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "f"})
		must(t, err)
		l, err := s.ClaimExecution(ctx, service.ClaimArgs{Namespace: "ns", InstanceID: "c", LeaseTTL: time.Minute})
		must(t, err)
		must(t, s.CompleteExecution(ctx, service.CompleteArgs{Lease: l}))
	}
	must(t, s.Close())
	// The leader's clock runs two hours behind, so that its sweep finds
	// nothing to do yet (the seeded fleet's lapsed workers and expired
	// lease stay as they are), while its lease (3 hours) holds now.
	s, err = service.Open(ctx, path, service.WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }))
	must(t, err)
	sctx, cancel := context.WithCancel(ctx)
	first := make(chan time.Time, 1)
	first <- time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.RunSweeper(sctx, service.SweeperArgs{Interval: time.Hour, InstanceID: "page-sweeper",
			After: func(time.Duration) <-chan time.Time { return first }})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		id, _, err := s.Leader(ctx)
		must(t, err)
		if id == "page-sweeper" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper did not lead")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return failed, func() {
		cancel()
		<-done
		_ = s.Close()
	}
}

// TestServeExecutionPage: an execution's page and JSON by id, with its
// attempts; an unknown or malformed id is 404; the search redirects an id
// to its page and lists a namespace's executions by unique key or group.
func TestServeExecutionPage(t *testing.T) {
	f := seed(t)
	failed, stop := addFailureAndLeader(t, f.path)
	stop()
	s, err := service.Open(context.Background(), f.path)
	must(t, err)
	keyed, err := s.CreateExecution(context.Background(), service.CreateExecutionArgs{Namespace: "ns", Lane: "z", UniqueKey: "order-7"})
	must(t, err)
	uuidKey := uuid.New() // a key shaped like an id
	uuidKeyed, err := s.CreateExecution(context.Background(), service.CreateExecutionArgs{Namespace: "ns", Lane: "z", UniqueKey: uuidKey.String()})
	must(t, err)
	var grouped []uuid.UUID
	for range 2 {
		id, err := s.CreateExecution(context.Background(), service.CreateExecutionArgs{Namespace: "ns", Lane: "z", Group: "tenant-1"})
		must(t, err)
		grouped = append(grouped, id)
	}
	must(t, s.Close())
	base := startServe(t, "--db", f.path)
	code, body := get(t, base+"/executions/"+failed.String(), "")
	for _, want := range []string{`data-execution="` + failed.String() + `"`, "disk full", `class="attempt outcome-failed"`, "<td>c</td>"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("the page of %s: %d, missing %q\n%s", failed, code, want, body)
		}
	}
	code, body = get(t, base+"/api/executions/"+failed.String(), "")
	if code != 200 || !strings.Contains(body, `"attempt_history": [`) || !strings.Contains(body, `"outcome": "failed"`) || !strings.Contains(body, `"last_error": "disk full"`) {
		t.Fatalf("the JSON of %s: %d\n%s", failed, code, body)
	}
	for _, path := range []string{"/executions/" + uuid.New().String(), "/executions/nope", "/api/executions/" + uuid.New().String(), "/executions?id=not-an-id"} {
		if code, _ := get(t, base+path, ""); code != 404 {
			t.Fatalf("%s: %d, want 404", path, code)
		}
	}
	// The search by unique key or group, in a namespace: each kind listed,
	// newest first, linked to the execution's page.
	for _, tc := range []struct {
		query string
		code  int
		want  []string
	}{
		{"?id=order-7&namespace=ns", 200, []string{`data-count="1"`, `href="/executions/` + keyed.String() + `"`}},
		{"?id=tenant-1&namespace=ns", 200, []string{`data-count="2"`, grouped[1].String() + `"><td><a`, `class="results by-group"`}},
		{"?id=tenant-1&namespace=other", 200, []string{`data-count="0"`, "None."}},
		{"?id=order-7", 404, []string{"give their namespace too"}},
		{"?id=" + uuidKey.String() + "&namespace=ns", 200, []string{`data-count="1"`, `class="results by-unique-key"`, `href="/executions/` + uuidKeyed.String() + `"`}},
		{"?id=" + keyed.String() + "&namespace=ns", 200, []string{`data-count="1"`, `class="results by-id"`, `href="/executions/` + keyed.String() + `"`}},
		{"?id=" + keyed.String() + "&namespace=other", 200, []string{`data-count="0"`}},
		{"?id=a%0Akey&namespace=ns", 400, []string{"neither may hold a control character"}},
		{"?id=key&namespace=a%09b", 400, []string{"neither may hold a control character"}},
	} {
		code, body := get(t, base+"/executions"+tc.query, "")
		for _, want := range tc.want {
			if code != tc.code || !strings.Contains(body, want) {
				t.Fatalf("search %s: %d, missing %q\n%s", tc.query, code, want, body)
			}
		}
	}
	if _, body := get(t, base+"/executions?id=tenant-1&namespace=ns", ""); strings.Index(body, grouped[1].String()) > strings.Index(body, grouped[0].String()) {
		t.Fatal("the group's executions are not listed newest first")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "/executions?id=" + f.waiting.String())
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/executions/"+f.waiting.String() {
		t.Fatalf("search: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestServeAgentList: the page and its JSON list agents with host and
// holder, filtered by state and host; a state the Store refuses is 400.
func TestServeAgentList(t *testing.T) {
	f := seed(t)
	base := startServe(t, "--db", f.path)
	code, body := get(t, base+"/api/status?agent_host=host-ag1", "")
	if code != 200 || !strings.Contains(body, `"id": "ag1"`) || strings.Contains(body, `"id": "ag2"`) || !strings.Contains(body, `"host": "host-ag1"`) {
		t.Fatalf("agents of host-ag1: %d\n%s", code, body)
	}
	if code, body = get(t, base+"/?agent_state=terminal", ""); code != 200 || !strings.Contains(body, "No agent matches the filter.") {
		t.Fatalf("no terminal agent: %d\n%s", code, body)
	}
	if code, _ = get(t, base+"/?agent_state=bogus", ""); code != 400 {
		t.Fatalf("a bogus state: %d, want 400", code)
	}
}

// TestServeMetricsFinished: roster serve's /metrics counts each lane's
// finished executions, read from the database (work no process of its own
// did), by outcome.
func TestServeMetricsFinished(t *testing.T) {
	f := seed(t)
	_, stop := addFailureAndLeader(t, f.path)
	stop()
	base := startServe(t, "--db", f.path)
	code, body := get(t, base+"/metrics", "")
	for _, want := range []string{`roster_lane_finished_total{lane="f",namespace="ns",outcome="completed"} 2`, `roster_lane_finished_total{lane="f",namespace="ns",outcome="failed"} 1`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics: %d, missing %s\n%s", code, want, body)
		}
	}
}
