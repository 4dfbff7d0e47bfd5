package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/service"
)

var actionPage = template.Must(template.ParseFS(webFS, "web/actions.html.tmpl", "web/history.html.tmpl"))

// historyKept is how many actions the page's history shows.
const historyKept = 50

// maxBulk bounds the executions one filtered action changes.
const maxBulk = 10000

// actions are what roster serve --actions lets a token's holder do from the
// page: retry or cancel an execution, cancel or retry every execution that a
// filter matches, pause and resume a lane. Each is a POST with the session's
// CSRF token, logged (what, when, by whom) and kept in the history.
type actions struct {
	s    *service.Store
	db   string // as the pages show it
	log  *slog.Logger
	csrf csrf
	now  func() time.Time

	mu      sync.Mutex
	seq     int
	history []actionRecord // newest first
}

// actionRecord is one action in the history.
type actionRecord struct {
	Seq     int       `json:"seq"`
	At      time.Time `json:"at"`
	Who     string    `json:"who"`
	What    string    `json:"what"`
	Outcome string    `json:"outcome"`
	OK      bool      `json:"ok"`
}

// record logs an action and adds it to the history.
func (a *actions) record(who, what, outcome string, ok bool) actionRecord {
	a.mu.Lock()
	a.seq++
	rec := actionRecord{Seq: a.seq, At: a.now().UTC(), Who: who, What: what, Outcome: outcome, OK: ok}
	a.history = append([]actionRecord{rec}, a.history[:min(len(a.history), historyKept-1)]...)
	a.mu.Unlock()
	level := slog.LevelInfo
	if !ok {
		level = slog.LevelWarn
	}
	a.log.Log(context.Background(), level, "roster serve: action", "seq", rec.Seq, "who", who, "what", what, "outcome", outcome, "ok", ok)
	return rec
}

// History is the latest actions, newest first.
func (a *actions) History() []actionRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]actionRecord(nil), a.history...)
}

// routes adds the actions' handlers.
func (a *actions) routes(h *statusHandler) {
	h.mux.HandleFunc("GET /actions", h.actionsPage)
	h.mux.HandleFunc("POST /actions/retry", a.guard(a.retry))
	h.mux.HandleFunc("POST /actions/cancel", a.guard(a.cancel))
	h.mux.HandleFunc("POST /actions/bulk", a.guard(a.bulk))
	h.mux.HandleFunc("POST /actions/pause", a.guard(func(r *http.Request) actionResult { return a.pause(r, true) }))
	h.mux.HandleFunc("POST /actions/resume", a.guard(func(r *http.Request) actionResult { return a.pause(r, false) }))
}

// actionsOff refuses every POST of a server without --actions.
func actionsOff(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "roster: 403 forbidden: this server offers no action (start roster serve with --actions and a --token)", http.StatusForbidden)
}

// actionResult is what an action did: what it was, its outcome, and the
// answer's status (200: done).
type actionResult struct {
	What, Outcome string
	Code          int
	// Confirm asks the user to confirm a filtered action first.
	Confirm *bulkFilter
}

// actionView is what the actions page shows.
type actionView struct {
	DB      string
	CSRF    string
	Back    string
	Result  *actionResult
	Record  *actionRecord
	History []actionRecord
	Paused  []service.LaneLimits
	Error   string
}

// guard checks a POST's CSRF token (refused with 403 before anything is
// read or changed), runs the action, records it and answers with the page
// showing its outcome.
func (a *actions) guard(do func(*http.Request) actionResult) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.csrf.checked(w, r) {
			return
		}
		res := do(r)
		v := actionView{CSRF: a.csrf.token(r), Back: localPath(r.PostFormValue("back")), Result: &res}
		if res.Confirm == nil {
			rec := a.record(actorOf(r).Name, res.What, res.Outcome, res.Code == http.StatusOK)
			v.Record = &rec
		}
		a.render(w, r, v, res.Code)
	}
}

// render writes the actions page: an outcome or a confirmation, with the
// paused lanes and the history.
func (a *actions) render(w http.ResponseWriter, r *http.Request, v actionView, code int) {
	v.DB, v.History = a.db, a.History()
	if v.CSRF == "" {
		v.CSRF = a.csrf.token(r)
	}
	if v.Back == "" {
		v.Back = "/"
	}
	paused, err := a.pausedLanes(r.Context())
	if err != nil {
		v.Error = "roster: " + describe(err)
	}
	v.Paused = paused
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = actionPage.Execute(w, v)
}

func (a *actions) pausedLanes(ctx context.Context) ([]service.LaneLimits, error) {
	all, err := a.s.ListLaneLimits(ctx, "")
	var paused []service.LaneLimits
	for _, l := range all {
		if l.Paused {
			paused = append(paused, l)
		}
	}
	return paused, err
}

// localPath is where an outcome's page links back to: a path of this
// server, else the status page.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return "/"
	}
	return p
}

// failed is the result of an action the Store refused.
func failed(what string, err error) actionResult {
	code := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, service.ErrInvalidInput):
		code = http.StatusBadRequest
	case errors.Is(err, service.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, service.ErrConflict):
		code = http.StatusConflict
	}
	return actionResult{What: what, Outcome: "refused: " + describe(err), Code: code}
}

// executionOf is the form's execution id.
func executionOf(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(strings.TrimSpace(r.PostFormValue("id")))
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: id: not an execution id: %q", service.ErrInvalidInput, r.PostFormValue("id"))
	}
	return id, nil
}

func (a *actions) retry(r *http.Request) actionResult {
	id, err := executionOf(r)
	what := "retry execution " + r.PostFormValue("id")
	if err == nil {
		err = a.retryOne(r.Context(), id)
	}
	if err != nil {
		return failed(what, err)
	}
	return actionResult{What: what, Outcome: "waiting again", Code: http.StatusOK}
}

// retryOne retries a failed or cancelled execution; one in another state
// is ErrConflict (the Store takes the retry of a waiting one as done
// already, which an operator's action must not claim to have done).
func (a *actions) retryOne(ctx context.Context, id uuid.UUID) error {
	e, err := a.s.GetExecution(ctx, id)
	if err != nil {
		return err
	}
	if e.State != service.ExecutionFailed && e.State != service.ExecutionCancelled {
		return fmt.Errorf("%w: execution %s is %s; only a failed or cancelled one can be retried", service.ErrConflict, id, e.State)
	}
	return a.s.RetryExecution(ctx, service.RetryExecutionArgs{ID: id})
}

// cancelReason is the LastError of what an action cancelled.
func cancelReason(r *http.Request) string {
	return "cancelled by " + actorOf(r).Name + " from roster serve"
}

func (a *actions) cancel(r *http.Request) actionResult {
	id, err := executionOf(r)
	what := "cancel execution " + r.PostFormValue("id")
	if err == nil {
		err = a.s.CancelExecution(r.Context(), service.CancelExecutionArgs{ID: id, Reason: cancelReason(r)})
	}
	if err != nil {
		return failed(what, err)
	}
	return actionResult{What: what, Outcome: "cancelled", Code: http.StatusOK}
}

// pause pauses (or resumes) a lane, keeping its other limits.
func (a *actions) pause(r *http.Request, pause bool) actionResult {
	ns, lane := strings.TrimSpace(r.PostFormValue("namespace")), strings.TrimSpace(r.PostFormValue("lane"))
	verb := map[bool]string{true: "pause", false: "resume"}[pause]
	what := fmt.Sprintf("%s lane %s of namespace %s", verb, lane, ns)
	switch {
	case ns == "":
		return failed(what, fmt.Errorf("%w: namespace: the lane's namespace is required", service.ErrInvalidInput))
	case lane == "":
		return failed(what, fmt.Errorf("%w: lane: required", service.ErrInvalidInput))
	}
	limits, err := a.s.ListLaneLimits(r.Context(), ns)
	if err != nil {
		return failed(what, err)
	}
	l, found := service.LaneLimits{Namespace: ns, Lane: lane}, false
	for _, x := range limits {
		if x.Namespace == ns && x.Lane == lane {
			l, found = x, true
		}
	}
	if !pause && !found {
		return failed(what, fmt.Errorf("%w: lane %q of namespace %q has no limits (it is not paused)", service.ErrNotFound, lane, ns))
	}
	l.Paused = pause
	if err := a.s.PutLaneLimits(r.Context(), l); err != nil {
		return failed(what, err)
	}
	return actionResult{What: what, Outcome: verb + "d", Code: http.StatusOK}
}

// bulkFilter is a filtered action: cancel (waiting or running executions)
// or retry (failed or cancelled ones) of a namespace, a lane ("" every
// lane) and a state; Matching is how many it matched when counted.
type bulkFilter struct {
	Op, Namespace, Lane string
	State               service.ExecutionState
	Matching            int
	More                bool   // more than maxBulk match: the action takes the first maxBulk
	Upto                string // the last id counted: the confirmed action takes none after it
}

func (f bulkFilter) String() string {
	lane := "every lane"
	if f.Lane != "" {
		lane = "lane " + f.Lane
	}
	return fmt.Sprintf("%s every %s execution of namespace %s, %s", f.Op, f.State, f.Namespace, lane)
}

// bulkOf reads and checks the form's filter.
func bulkOf(r *http.Request) (bulkFilter, error) {
	f := bulkFilter{Op: r.PostFormValue("op"), Namespace: strings.TrimSpace(r.PostFormValue("namespace")),
		Lane: strings.TrimSpace(r.PostFormValue("lane")), State: service.ExecutionState(r.PostFormValue("state"))}
	states := map[string][]service.ExecutionState{
		"cancel": {service.ExecutionWaiting, service.ExecutionRunning},
		"retry":  {service.ExecutionFailed, service.ExecutionCancelled},
	}
	ok, known := states[f.Op]
	switch {
	case !known:
		return f, fmt.Errorf("%w: op: %q is neither cancel nor retry", service.ErrInvalidInput, f.Op)
	case f.Namespace == "":
		return f, fmt.Errorf("%w: namespace: a filtered action needs one", service.ErrInvalidInput)
	case f.State != ok[0] && f.State != ok[1]:
		return f, fmt.Errorf("%w: state: %s takes %s or %s executions, not %q", service.ErrInvalidInput, f.Op, ok[0], ok[1], f.State)
	}
	return f, nil
}

// matching lists the ids the filter matches now in id order, at most max
// and none after upto (uuid.Nil: no bound), and whether there are more.
func (a *actions) matching(ctx context.Context, f bulkFilter, upto uuid.UUID, max int) ([]uuid.UUID, bool, error) {
	var ids []uuid.UUID
	after := ""
	for {
		page, err := a.s.ListExecutions(ctx, service.ListExecutionsArgs{Namespace: f.Namespace, Lane: f.Lane, State: f.State, After: after, Limit: 1000})
		if err != nil {
			return nil, false, err
		}
		for _, e := range page.Executions {
			if upto != uuid.Nil && bytes.Compare(e.ID[:], upto[:]) > 0 {
				return ids, false, nil
			}
			if len(ids) == max {
				return ids, true, nil
			}
			ids = append(ids, e.ID)
		}
		if page.Next == "" {
			return ids, false, nil
		}
		after = page.Next
	}
}

// bulk answers a filtered action: without confirm it counts the matching
// executions and asks for a confirmation that shows how many; confirmed, it
// acts on those of the counted that match still, never more than the
// confirmed count and none created since the count. One that changed state
// in between (another hand finished, cancelled or retried it) is skipped,
// and counted as such.
func (a *actions) bulk(r *http.Request) actionResult {
	f, err := bulkOf(r)
	if err != nil {
		return failed("filtered action", err)
	}
	what := f.String()
	if r.PostFormValue("confirm") == "" {
		ids, more, err := a.matching(r.Context(), f, uuid.Nil, maxBulk)
		if err != nil {
			return failed(what, err)
		}
		f.Matching, f.More = len(ids), more
		if len(ids) > 0 {
			f.Upto = ids[len(ids)-1].String()
		}
		return actionResult{What: what, Code: http.StatusOK, Confirm: &f}
	}
	confirmed, err := strconv.Atoi(r.PostFormValue("confirm"))
	if err != nil || confirmed < 1 || confirmed > maxBulk {
		return failed(what, fmt.Errorf("%w: confirm: %q is not a count of 1 to %d executions", service.ErrInvalidInput, r.PostFormValue("confirm"), maxBulk))
	}
	upto, err := uuid.Parse(r.PostFormValue("upto"))
	if err != nil {
		return failed(what, fmt.Errorf("%w: upto: not the last execution id counted: %q", service.ErrInvalidInput, r.PostFormValue("upto")))
	}
	ids, _, err := a.matching(r.Context(), f, upto, confirmed)
	if err != nil {
		return failed(what, err)
	}
	done := 0
	for _, id := range ids {
		if f.Op == "cancel" {
			err = a.s.CancelExecution(r.Context(), service.CancelExecutionArgs{ID: id, Reason: cancelReason(r)})
		} else {
			err = a.retryOne(r.Context(), id)
		}
		switch {
		case err == nil:
			done++
		case errors.Is(err, service.ErrConflict), errors.Is(err, service.ErrNotFound):
		default:
			res := failed(what, err)
			res.Outcome = fmt.Sprintf("%d done, then %s", done, res.Outcome)
			return res
		}
	}
	verb := map[string]string{"cancel": "cancelled", "retry": "retried"}[f.Op]
	outcome := fmt.Sprintf("%s %d of the %d confirmed", verb, done, confirmed)
	if skipped := confirmed - done; skipped > 0 {
		outcome += fmt.Sprintf("; %d skipped: their state changed meanwhile", skipped)
	}
	return actionResult{What: what, Outcome: outcome, Code: http.StatusOK}
}

// actionsPage serves the actions page: the filtered actions' form, the
// paused lanes to resume, and the history.
func (h *statusHandler) actionsPage(w http.ResponseWriter, r *http.Request) {
	h.actions.render(w, r, actionView{Back: "/actions"}, http.StatusOK)
}
