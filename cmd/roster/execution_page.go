package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/service"
)

var executionPage = template.Must(template.ParseFS(webFS, "web/execution.html.tmpl"))

// executionStatus is what an execution's page shows: every field, its
// metadata, payload, result or last error, and its attempts.
type executionStatus struct {
	DB              string
	E               executionJSON
	Created, RunAt  string
	Finished        string
	Payload, Result string
	Attempts        []attemptStatus
	// Actions: the page offers retry or cancel, with this CSRF token.
	Actions bool
	CSRF    string
}

type attemptStatus struct {
	attemptJSON
	Started, Ended string
}

// pageTime is a time as the pages show it ("-": none).
func pageTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000") + " UTC"
}

// shown is a payload or result as the page shows it: its text when it is
// valid UTF-8, else how many bytes it holds.
func shown(b []byte, text *string) string {
	switch {
	case len(b) == 0:
		return ""
	case text != nil:
		return *text
	}
	return "(" + strconv.Itoa(len(b)) + " bytes, not text)"
}

// executionByID reads the execution of the request's {id}, with its
// attempts; a bad or unknown id answers 404 (false).
func (h *statusHandler) executionByID(w http.ResponseWriter, r *http.Request) (service.Execution, []service.Attempt, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, "roster: not an execution id: "+r.PathValue("id"), http.StatusNotFound)
		return service.Execution{}, nil, false
	}
	e, err := h.s.GetExecution(r.Context(), id)
	if err == nil {
		var as []service.Attempt
		if as, err = h.s.ListAttempts(r.Context(), id); err == nil {
			return e, as, true
		}
	}
	code := http.StatusServiceUnavailable
	if errors.Is(err, service.ErrNotFound) {
		code = http.StatusNotFound
	}
	http.Error(w, "roster: "+describe(err), code)
	return service.Execution{}, nil, false
}

// execution serves an execution's page.
func (h *statusHandler) execution(w http.ResponseWriter, r *http.Request) {
	e, as, ok := h.executionByID(w, r)
	if !ok {
		return
	}
	v := executionView(e)
	out := executionStatus{DB: h.db, E: v, Created: pageTime(e.CreatedAt), RunAt: pageTime(e.RunAt), Finished: pageTime(e.FinishedAt),
		Payload: shown(e.Payload, v.PayloadText), Result: shown(e.Result, v.ResultText)}
	for _, a := range attemptViews(as) {
		st := attemptStatus{attemptJSON: a, Started: pageTime(a.StartedAt), Ended: "-"}
		if a.EndedAt != nil {
			st.Ended = pageTime(*a.EndedAt)
		}
		out.Attempts = append(out.Attempts, st)
	}
	if h.actions != nil {
		out.Actions, out.CSRF = true, h.actions.csrf.token(r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := executionPage.Execute(w, out); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// executionJSONHandler serves an execution and its attempts as JSON.
func (h *statusHandler) executionJSONHandler(w http.ResponseWriter, r *http.Request) {
	e, as, ok := h.executionByID(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		executionJSON
		AttemptList []attemptJSON `json:"attempt_history"`
	}{executionView(e), attemptViews(as)})
}

// searchShown is how many executions a search lists per kind, newest first.
const searchShown = 50

var searchPage = template.Must(template.ParseFS(webFS, "web/search.html.tmpl"))

// searchResult is one execution a search found.
type searchResult struct {
	ID, Lane, State, Created, LastError string
	Attempts                            int
}

func resultOf(e service.Execution) searchResult {
	return searchResult{ID: e.ID.String(), Lane: e.Lane, State: string(e.State), Created: pageTime(e.CreatedAt), LastError: e.LastError, Attempts: e.Attempts}
}

// searchSection is the executions found by one kind of search.
type searchSection struct {
	Title, Class string
	Rows         []searchResult
	More         bool
}

// findExecution answers the search form: an execution id alone opens its
// page; with a namespace, the query lists the namespace's execution of that
// id (if it is one), its executions with that unique key and those of that
// group, newest first (each through an index of its own).
func (h *statusHandler) findExecution(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("id"))
	ns := strings.TrimSpace(r.URL.Query().Get("namespace"))
	id, idErr := uuid.Parse(q)
	if idErr == nil && ns == "" {
		http.Redirect(w, r, "/executions/"+url.PathEscape(q), http.StatusSeeOther)
		return
	}
	if q == "" || ns == "" {
		http.Error(w, "roster: no execution id: "+q+" (to find executions by unique key or group, give their namespace too)", http.StatusNotFound)
		return
	}
	if service.CheckIdentifier("namespace", ns) != nil || service.CheckIdentifier("key", q) != nil {
		http.Error(w, fmt.Sprintf("roster: 400 bad request: %q in namespace %q: neither may hold a control character or exceed 256 bytes", q, ns), http.StatusBadRequest)
		return
	}
	view := struct {
		DB, Query, Namespace string
		Count                int
		Sections             []searchSection
	}{DB: h.db, Query: q, Namespace: ns}
	if idErr == nil { // an id with a namespace: it may also be a key (UUID keys are common)
		sec := searchSection{Title: "By id", Class: "by-id"}
		e, err := h.s.GetExecution(r.Context(), id)
		switch {
		case err == nil && e.Namespace == ns:
			sec.Rows = []searchResult{resultOf(e)}
		case err != nil && !errors.Is(err, service.ErrNotFound):
			http.Error(w, "roster: "+describe(err), loadErrorCode(err))
			return
		}
		view.Count += len(sec.Rows)
		view.Sections = append(view.Sections, sec)
	}
	for _, kind := range []struct {
		title, class string
		args         service.ListExecutionsArgs
	}{
		{"By unique key", "by-unique-key", service.ListExecutionsArgs{UniqueKey: q}},
		{"In the group", "by-group", service.ListExecutionsArgs{Group: q}},
	} {
		a := kind.args
		a.Namespace, a.NewestFirst, a.Limit = ns, true, searchShown
		page, err := h.s.ListExecutions(r.Context(), a)
		if err != nil {
			http.Error(w, "roster: "+describe(err), loadErrorCode(err))
			return
		}
		sec := searchSection{Title: kind.title, Class: kind.class, More: page.Next != ""}
		for _, e := range page.Executions {
			sec.Rows = append(sec.Rows, resultOf(e))
		}
		view.Count += len(sec.Rows)
		view.Sections = append(view.Sections, sec)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := searchPage.Execute(w, view); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
