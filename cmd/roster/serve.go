package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rosterdb/roster/metrics"
	"github.com/rosterdb/roster/service"
)

//go:embed web
var webFS embed.FS

var statusPage = template.Must(template.ParseFS(webFS, "web/status.html.tmpl", "web/history.html.tmpl"))

// serve serves a read-only status page of the fleet, the same data as JSON,
// /metrics and /healthz, until interrupted.
func serve(ctx context.Context, c *cli, args []string) error {
	addr := c.flags.String("addr", "127.0.0.1:8080", "listen address; any but loopback needs --token")
	var tokens []operatorToken
	c.flags.Var(tokenFlag{c, &tokens}, "token", "a bearer token every request must carry (but GET /healthz: see --token-healthz), as NAME=SECRET (actions are logged under NAME) or a bare SECRET (named operator); may be given several times ($ROSTER_TOKEN: one, when no --token is given)")
	tokenHealthz := c.flags.Bool("token-healthz", false, "require the token for /healthz too (without it /healthz answers anyone: it says only whether the database answers)")
	refresh := c.flags.Duration("refresh", 5*time.Second, "how often the page refreshes itself")
	withActions := c.flags.Bool("actions", false, "offer actions on the page (retry, cancel, filtered cancel and retry, pause and resume a lane), each a POST with a CSRF token, logged with who did it; needs --token even on loopback, and opens the database for writing")
	if env := os.Getenv("ROSTER_TOKEN"); env != "" {
		c.secrets = append(c.secrets, env)
	}
	if err := c.parse(args, 0); err != nil {
		return err
	}
	if env := os.Getenv("ROSTER_TOKEN"); env != "" && len(tokens) == 0 {
		if err := (tokenFlag{c, &tokens}).Set(env); err != nil {
			return usagef("invalid $ROSTER_TOKEN: %v", err)
		}
	}
	if *refresh < time.Second {
		return usagef("invalid --refresh: %v is below 1s", *refresh)
	}
	loopback, err := isLoopback(*addr)
	if err != nil {
		return usagef("invalid --addr: %v", err)
	}
	switch {
	case *withActions && len(tokens) == 0:
		return usagef("refusing to offer --actions without --token (or $ROSTER_TOKEN), even on loopback: every action is logged with the token's name")
	case !loopback && len(tokens) == 0:
		return usagef("refusing to serve on %s without --token (or $ROSTER_TOKEN): only a loopback address may go without one", *addr)
	}
	open := c.openRead
	if *withActions {
		open = c.openWrite
	}
	s, err := open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	sess := newSessions()
	h := newStatusHandler(s, displayDB(c.db), *refresh, sess)
	if *withActions {
		h.enableActions(slog.New(slog.NewTextHandler(c.stderr, nil)))
	}
	var openPaths []string
	if !*tokenHealthz {
		openPaths = append(openPaths, "/healthz")
	}
	srv := &http.Server{Handler: requireToken(tokens, sess, h.mux, openPaths...), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.stdout, "serving %s on http://%s/\n", displayDB(c.db), ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// statusHandler serves the page, its JSON, /metrics and /healthz.
type statusHandler struct {
	s       *service.Store
	db      string
	refresh time.Duration
	mux     *http.ServeMux
	ready   *readySamples // the charts' ready counts, sampled at each load
	// sessions are the browsers logged in with a token; csrf the key of
	// the forms' CSRF tokens.
	sessions *sessions
	csrf     csrf
	// actions are nil unless --actions.
	actions *actions
}

func newStatusHandler(s *service.Store, db string, refresh time.Duration, sess *sessions) *statusHandler {
	h := &statusHandler{s: s, db: db, refresh: refresh, mux: http.NewServeMux(), ready: newReadySamples(), sessions: sess, csrf: newCSRF()}
	collector := metrics.NewFleet() // serve does no work: no counter of its own would move
	collector.Watch(s)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector)
	static, _ := fs.Sub(webFS, "web")
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("GET /{$}", h.page)
	h.mux.HandleFunc("GET /api/status", h.json)
	h.mux.HandleFunc("GET /executions/{id}", h.execution)
	h.mux.HandleFunc("GET /api/executions/{id}", h.executionJSONHandler)
	h.mux.HandleFunc("GET /executions", h.findExecution)
	h.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	h.mux.HandleFunc("GET /healthz", h.healthz)
	h.mux.HandleFunc("POST /logout", h.logout)
	h.mux.HandleFunc("/", h.noAction)
	return h
}

// historyOnStatus is how many of the latest actions the status page shows
// (the actions page shows them all).
const historyOnStatus = 5

// noAction answers what no route takes: a POST is 403 on a server without
// --actions (it offers no action); anything else is 404.
func (h *statusHandler) noAction(w http.ResponseWriter, r *http.Request) {
	if h.actions == nil && r.Method == http.MethodPost {
		actionsOff(w, r)
		return
	}
	http.NotFound(w, r)
}

// enableActions offers the actions, logging each on log.
func (h *statusHandler) enableActions(log *slog.Logger) {
	h.actions = &actions{s: h.s, db: h.db, log: log, csrf: h.csrf, now: time.Now}
	h.actions.routes(h)
}

// status is what the page and /api/status show.
type status struct {
	DB             string            `json:"db"`
	At             time.Time         `json:"at"`
	RefreshSeconds int               `json:"refresh_seconds"`
	Namespaces     []namespaceStatus `json:"namespaces"`
	Agents         map[string]int    `json:"agents"`
	AgentStates    []agentCount      `json:"-"`
	Events         []eventJSON       `json:"events"`
	// Heartbeats: the events include heartbeats (hidden by default).
	Heartbeats  bool             `json:"heartbeats"`
	Leader      string           `json:"leader"`
	LeaderUntil *time.Time       `json:"leader_until"`
	LeaderLeft  string           `json:"-"`
	Schedules   []scheduleStatus `json:"schedules"`
	// BarScale is the executions a full lane bar stands for (the busiest
	// lane's ready, scheduled and running), the same for every lane.
	BarScale int `json:"-"`
	// Throughput: per lane, the last hour's completions and failures per
	// minute (from FinishedAt) and the ready counts sampled by this server;
	// a chart's full height is FinishedMax per minute, ReadyMax ready.
	Throughput            []laneChart `json:"throughput"`
	FinishedMax, ReadyMax int         `json:"-"`
	// AgentList: agents with their host and holder, of the filter's state
	// and host (the first agentsShown by id).
	AgentList   []agentStatus `json:"agent_list"`
	AgentFilter agentFilter   `json:"-"`
	// With --actions: the forms' CSRF token and the latest actions.
	// Session: the page is a logged-in browser's (it offers to log out).
	Session bool           `json:"-"`
	Actions bool           `json:"-"`
	CSRF    string         `json:"-"`
	History []actionRecord `json:"actions,omitempty"`
}

// withActions adds what the page's forms need: the log out of a browser's
// session, and with --actions the actions' and their history.
func (h *statusHandler) withActions(st *status, r *http.Request) {
	st.Session = actorOf(r).Session != ""
	if st.Session || h.actions != nil {
		st.CSRF = h.csrf.token(r)
	}
	if h.actions == nil {
		return
	}
	st.Actions, st.History = true, h.actions.History()
	if st.History == nil {
		st.History = []actionRecord{}
	}
}

// loadErrorCode is the status of a page that could not be read: 400 for a
// filter the Store refused, else 503.
func loadErrorCode(err error) int {
	if errors.Is(err, service.ErrInvalidInput) {
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

// agentsShown is how many agents the page lists.
const agentsShown = 50

// agentFilter is the page's choice of agents: a state ("" any) and a host
// ("" any), from the query's agent_state and agent_host.
type agentFilter struct{ State, Host string }

func agentFilterOf(r *http.Request) agentFilter {
	q := r.URL.Query()
	return agentFilter{State: q.Get("agent_state"), Host: q.Get("agent_host")}
}

// States lists the states the filter offers.
func (agentFilter) States() []string {
	return []string{string(service.AgentSpawned), string(service.AgentRunning), string(service.AgentSuspended), string(service.AgentTerminal)}
}

// agentStatus is one agent as the page lists it.
type agentStatus struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Host     string `json:"host"`
	Holder   string `json:"holder"` // NAMESPACE/INSTANCE, "" when none
	Provider string `json:"provider"`
}

// agents reads the agents the filter asks for.
func (h *statusHandler) agents(ctx context.Context, f agentFilter) ([]agentStatus, error) {
	page, err := h.s.ListAgents(ctx, service.ListAgentsArgs{State: service.AgentState(f.State), Host: f.Host, Limit: agentsShown})
	if err != nil {
		return nil, err
	}
	out := []agentStatus{}
	for _, a := range page.Agents {
		as := agentStatus{ID: a.ID, State: string(a.State), Host: a.Host, Provider: a.Provider}
		if a.HolderInstanceID != "" {
			as.Holder = a.HolderNamespace + "/" + a.HolderInstanceID
		}
		out = append(out, as)
	}
	return out, nil
}

type scheduleStatus struct {
	scheduleJSON
	Spec string `json:"-"`
	Next string `json:"-"`
}

// failureStatus is one of a namespace's latest failed executions.
type failureStatus struct {
	ID         string    `json:"id"`
	Lane       string    `json:"lane"`
	FinishedAt time.Time `json:"finished_at"`
	Ago        string    `json:"-"`
	Attempts   int       `json:"attempts"`
	LastError  string    `json:"last_error"`
}

type agentCount struct {
	State string
	N     int
}

type namespaceStatus struct {
	Namespace     string          `json:"namespace"`
	WorkersAlive  int             `json:"workers_alive"`
	WorkersLapsed int             `json:"workers_lapsed"`
	ExpiredLeases int             `json:"expired_leases"`
	Lanes         []laneStatus    `json:"lanes"`
	Workers       []workerStatus  `json:"workers"`
	Expired       []expiredStatus `json:"expired_leases_oldest"`
	Failures      []failureStatus `json:"latest_failures"`
}

type laneStatus struct {
	laneJSON
	ReadyPct, ScheduledPct, RunningPct float64 `json:"-"`
	OldestReadyAge                     string  `json:"-"`
}

type workerStatus struct {
	InstanceID  string `json:"instance_id"`
	WorkerID    string `json:"worker_id"`
	Lanes       string `json:"lanes"`
	Alive       bool   `json:"alive"`
	ExpiresInMs int64  `json:"expires_in_ms"`
	Expiry      string `json:"-"`
}

type expiredStatus struct {
	ExecutionID string `json:"execution_id"`
	InstanceID  string `json:"instance_id"`
	ExpiredMs   int64  `json:"expired_ms_ago"`
	Ago         string `json:"-"`
}

// failuresShown is how many of a namespace's latest failures the page shows.
const failuresShown = 5

// load reads everything the page shows; heartbeats says whether the events
// include heartbeats.
func (h *statusHandler) load(ctx context.Context, heartbeats bool, agents agentFilter) (status, error) {
	st, err := h.s.Stats(ctx, time.Time{})
	if err != nil {
		return status{}, err
	}
	out := status{DB: h.db, At: st.At, RefreshSeconds: int(h.refresh.Seconds()), Agents: map[string]int{}, Events: []eventJSON{},
		Heartbeats: heartbeats, Leader: st.Leader, LeaderUntil: optional(st.LeaderUntil), Schedules: []scheduleStatus{}}
	if st.Leader != "" {
		out.LeaderLeft = human(st.LeaderUntil.Sub(st.At))
	}
	scs, err := h.s.ListSchedules(ctx, "")
	if err != nil {
		return status{}, err
	}
	for _, sc := range scs {
		next := "paused"
		if !sc.Paused {
			next = sc.NextRunAt.Format("2006-01-02 15:04:05") + " UTC"
		}
		out.Schedules = append(out.Schedules, scheduleStatus{scheduleJSON: scheduleView(sc), Spec: spec(sc), Next: next})
	}
	for _, state := range []service.AgentState{service.AgentSpawned, service.AgentRunning, service.AgentSuspended, service.AgentTerminal} {
		out.Agents[string(state)] = st.Agents[state]
		out.AgentStates = append(out.AgentStates, agentCount{string(state), st.Agents[state]})
	}
	if out.AgentList, err = h.agents(ctx, agents); err != nil {
		return status{}, err
	}
	out.AgentFilter = agents
	h.ready.note(st)
	finished, err := h.s.Throughput(ctx, st.At.Add(-(chartMinutes-1)*time.Minute))
	if err != nil {
		return status{}, err
	}
	out.Throughput, out.FinishedMax, out.ReadyMax = charts(st.At, finished, h.ready.lanes())
	if out.Throughput == nil {
		out.Throughput = []laneChart{}
	}
	sv := statsView(st)
	// Every lane's bar is drawn on one scale, the busiest lane's, so that
	// lanes can be compared; the legend says what a full bar is.
	scale := 1
	for _, ns := range sv.Namespaces {
		for _, l := range ns.Lanes {
			scale = max(scale, l.Ready+l.Scheduled+l.Running)
		}
	}
	out.BarScale = scale
	for i, ns := range st.Namespaces {
		n := namespaceStatus{Namespace: ns.Namespace, WorkersAlive: ns.WorkersAlive, WorkersLapsed: ns.WorkersLapsed,
			ExpiredLeases: ns.ExpiredLeases, Lanes: []laneStatus{}, Workers: []workerStatus{}, Expired: []expiredStatus{}}
		for _, l := range sv.Namespaces[i].Lanes {
			total := float64(scale)
			ls := laneStatus{laneJSON: l, ReadyPct: pct(l.Ready, total), ScheduledPct: pct(l.Scheduled, total), RunningPct: pct(l.Running, total), OldestReadyAge: "-"}
			if l.OldestReadyRunAt != nil {
				ls.OldestReadyAge = human(time.Duration(l.OldestReadyAgeMs) * time.Millisecond)
			}
			n.Lanes = append(n.Lanes, ls)
		}
		page, err := h.s.ListWorkers(ctx, service.ListWorkersArgs{Namespace: ns.Namespace, Limit: 200})
		if err != nil {
			return status{}, err
		}
		for _, w := range page.Workers {
			left := w.ExpiresAt().Sub(st.At)
			ws := workerStatus{InstanceID: w.InstanceID, WorkerID: w.WorkerID, Lanes: list(w.Lanes), Alive: left > 0, ExpiresInMs: left.Milliseconds()}
			if left > 0 {
				ws.Expiry = "expires in " + human(left)
			} else {
				ws.Expiry = "lapsed " + human(-left) + " ago"
			}
			n.Workers = append(n.Workers, ws)
		}
		if ns.ExpiredLeases > 0 {
			leases, err := h.s.ListExpiredLeases(ctx, service.ListExpiredLeasesArgs{AsOf: st.At, Namespace: ns.Namespace, Limit: 10})
			if err != nil {
				return status{}, err
			}
			for _, l := range leases.Leases {
				ago := st.At.Sub(l.ExpiresAt)
				n.Expired = append(n.Expired, expiredStatus{ExecutionID: l.ExecutionID.String(), InstanceID: l.InstanceID,
					ExpiredMs: ago.Milliseconds(), Ago: human(ago) + " ago"})
			}
		}
		failed, err := h.s.ListExecutions(ctx, service.ListExecutionsArgs{Namespace: ns.Namespace, State: service.ExecutionFailed,
			Limit: failuresShown, NewestFirst: true})
		if err != nil {
			return status{}, err
		}
		n.Failures = []failureStatus{}
		for _, e := range failed.Executions {
			n.Failures = append(n.Failures, failureStatus{ID: e.ID.String(), Lane: e.Lane, FinishedAt: e.FinishedAt,
				Ago: human(st.At.Sub(e.FinishedAt)) + " ago", Attempts: e.Attempts, LastError: e.LastError})
		}
		out.Namespaces = append(out.Namespaces, n)
	}
	// Heartbeats would fill the panel: unless asked for, read further back
	// and keep the other kinds.
	n := 20
	if !heartbeats {
		n = 500
	}
	events, err := h.s.LatestWorkerEvents(ctx, "", n)
	if err != nil {
		return status{}, err
	}
	for _, e := range events {
		if len(out.Events) == 20 {
			break
		}
		if heartbeats || e.Kind != service.EventHeartbeat {
			out.Events = append(out.Events, eventView(e))
		}
	}
	return out, nil
}

func pct(n int, total float64) float64 { return float64(int(float64(n)/total*1000)) / 10 }

// human prints a duration for people: 1.2s, 3m4s, 2h5m.
func human(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

func (h *statusHandler) page(w http.ResponseWriter, r *http.Request) {
	st, err := h.load(r.Context(), r.URL.Query().Get("heartbeats") == "1", agentFilterOf(r))
	if err != nil {
		http.Error(w, "roster: "+describe(err), loadErrorCode(err))
		return
	}
	h.withActions(&st, r)
	if len(st.History) > historyOnStatus {
		st.History = st.History[:historyOnStatus]
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusPage.Execute(w, st); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (h *statusHandler) json(w http.ResponseWriter, r *http.Request) {
	st, err := h.load(r.Context(), r.URL.Query().Get("heartbeats") != "0", agentFilterOf(r))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = enc.Encode(map[string]string{"error": "roster: " + describe(err)})
		return
	}
	h.withActions(&st, r)
	_ = enc.Encode(st)
}

// healthz answers "ok" while the database answers, else 503 with why (to a
// request without the token, only that it is unavailable).
func (h *statusHandler) healthz(w http.ResponseWriter, r *http.Request) {
	if _, err := h.s.Stats(r.Context(), time.Time{}); err != nil {
		why := "roster: " + describe(err)
		if tokenless(r) {
			why = "roster: the database is unavailable"
		}
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// tokenlessKey marks the context of a request a server with a token serves
// without it (an open path).
type tokenlessKey struct{}

// tokenless reports whether r came without the token to a server that has
// one: it is shown nothing an error might tell.
func tokenless(r *http.Request) bool {
	v, _ := r.Context().Value(tokenlessKey{}).(bool)
	return v
}
