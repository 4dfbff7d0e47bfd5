package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/rosterdb/roster/service"
)

// registerFleet adds the fleet commands: executions retry, schedules and
// leader.
func registerFleet() {
	ex := commands["executions"]
	ex.subs["retry"] = &command{args: " ID...", help: "Redrive failed or cancelled executions: each waits again (at --run-at), with one more attempt when none is left.", run: executionsRetry}
	ex.subs["cancel"] = &command{args: " [ID...]", help: "Cancel waiting or running executions (a running one's lease ends at once): the IDs given, or with --all every live one matching --namespace, --lane and --state.", run: executionsCancel}
	ex.subList = subList(ex.subs)
	commands["schedules"] = &command{subs: map[string]*command{
		"list":   {help: "List schedules by (namespace, name), with their next run and the state of the last (reads only).", run: schedulesList},
		"put":    {args: " NAMESPACE NAME", help: "Create or replace a schedule: --every or --cron (5 fields, UTC), and the template of each run (--lane, --payload, ...).", run: schedulesPut},
		"delete": {args: " NAMESPACE NAME", help: "Delete a schedule (its past runs stay).", run: schedulesDelete},
		"pause":  {args: " NAMESPACE NAME", help: "Pause a schedule: it creates nothing until resumed.", run: schedulesPause},
		"resume": {args: " NAMESPACE NAME", help: "Resume a paused schedule from its next period.", run: schedulesResume},
	}}
	commands["schedules"].subList = subList(commands["schedules"].subs)
	commands["leader"] = &command{help: "Show which RunSweeper instance leads the fleet's maintenance, and until when (reads only).", run: leaderShow}
}

// executionIDs parses the positional arguments as execution ids.
func (c *cli) executionIDs() ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, len(c.args))
	for i, a := range c.args {
		id, err := uuid.Parse(a)
		if err != nil {
			return nil, usagef("invalid ID: %q is not an execution id", a)
		}
		ids[i] = id
	}
	return ids, nil
}

// eachExecution runs fn on each id, then prints the executions; the first
// error stops it (the ones before it stay done).
func (c *cli) eachExecution(ctx context.Context, s *service.Store, ids []uuid.UUID, fn func(id uuid.UUID) error) error {
	out := pageJSON[executionJSON]{Items: []executionJSON{}}
	var rows [][]string
	for _, id := range ids {
		if err := fn(id); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		e, err := s.GetExecution(ctx, id)
		if err != nil {
			return err
		}
		out.Items = append(out.Items, executionView(e))
		rows = append(rows, executionRow(e))
	}
	return c.print(out, executionHeader, rows, "")
}

func executionsRetry(ctx context.Context, c *cli, args []string) error {
	runAt := c.flags.String("run-at", "", "when the retried executions become claimable (RFC 3339; default now)")
	return c.withWrite(ctx, args, oneOrMore, func(s *service.Store) error {
		ids, err := c.executionIDs()
		if err != nil {
			return err
		}
		var at time.Time
		if *runAt != "" {
			if at, err = time.Parse(time.RFC3339Nano, *runAt); err != nil {
				return usagef("invalid --run-at: %q is not an RFC 3339 time", *runAt)
			}
		}
		return c.eachExecution(ctx, s, ids, func(id uuid.UUID) error {
			return s.RetryExecution(ctx, service.RetryExecutionArgs{ID: id, RunAt: at})
		})
	})
}

func executionsCancel(ctx context.Context, c *cli, args []string) error {
	reason := c.flags.String("reason", "cancelled by an operator", "why (becomes the execution's last error)")
	all := c.flags.Bool("all", false, "cancel every waiting and running execution matching --namespace, --lane and --state (no IDs)")
	ns := c.flags.String("namespace", "", "with --all: only this namespace (required)")
	lane := c.flags.String("lane", "", "with --all: only this lane")
	state := c.flags.String("state", "", "with --all: only this state (waiting or running)")
	return c.withWrite(ctx, args, anyCount, func(s *service.Store) error {
		if !*all {
			if len(c.args) == 0 {
				return usagef("give the IDs to cancel, or --all with --namespace")
			}
			ids, err := c.executionIDs()
			if err != nil {
				return err
			}
			return c.eachExecution(ctx, s, ids, func(id uuid.UUID) error {
				return s.CancelExecution(ctx, service.CancelExecutionArgs{ID: id, Reason: *reason})
			})
		}
		if len(c.args) > 0 {
			return usagef("--all takes no IDs")
		}
		if *ns == "" {
			return usagef("--all needs --namespace (a cancel of every namespace is too easy to run by mistake)")
		}
		states := []service.ExecutionState{service.ExecutionWaiting, service.ExecutionRunning}
		switch *state {
		case "":
		case "waiting", "running":
			states = []service.ExecutionState{service.ExecutionState(*state)}
		default:
			return usagef("invalid --state: %q (waiting or running)", *state)
		}
		cancelled := 0
		for _, st := range states {
			for {
				// Each page is cancelled before the next is read, so the
				// list always starts over: cancelled ones leave it.
				page, err := s.ListExecutions(ctx, service.ListExecutionsArgs{Namespace: *ns, Lane: *lane, State: st, Limit: 1000})
				if err != nil {
					return err
				}
				n := 0
				for _, e := range page.Executions {
					err := s.CancelExecution(ctx, service.CancelExecutionArgs{ID: e.ID, Reason: *reason})
					switch {
					case err == nil:
						n++
					case errors.Is(err, service.ErrConflict), errors.Is(err, service.ErrNotFound): // it ended meanwhile
					default:
						return err
					}
				}
				cancelled += n
				if page.Next == "" || n == 0 {
					break
				}
			}
		}
		return c.print(map[string]int{"cancelled": cancelled}, []string{"CANCELLED"}, [][]string{{strconv.Itoa(cancelled)}}, "")
	})
}

// Schedules.

type scheduleJSON struct {
	Namespace            string     `json:"namespace"`
	Name                 string     `json:"name"`
	EveryMs              int64      `json:"every_ms,omitempty"`
	Cron                 string     `json:"cron,omitempty"`
	Lane                 string     `json:"lane"`
	Priority             int        `json:"priority"`
	Payload              []byte     `json:"payload"`
	PayloadText          *string    `json:"payload_text,omitempty"`
	RequiredCapabilities []string   `json:"required_capabilities"`
	MaxAttempts          int        `json:"max_attempts"`
	RetryBackoffMs       int64      `json:"retry_backoff_ms"`
	Paused               bool       `json:"paused"`
	NextRunAt            *time.Time `json:"next_run_at"` // null while paused
	LastExecutionID      string     `json:"last_execution_id,omitempty"`
	LastState            string     `json:"last_state,omitempty"`
}

func scheduleView(sc service.Schedule) scheduleJSON {
	v := scheduleJSON{Namespace: sc.Namespace, Name: sc.Name, EveryMs: sc.Every.Milliseconds(), Cron: sc.Cron,
		Lane: sc.Template.Lane, Priority: sc.Template.Priority, Payload: sc.Template.Payload, PayloadText: text(sc.Template.Payload),
		RequiredCapabilities: orEmpty(sc.Template.RequiredCapabilities), MaxAttempts: sc.Template.MaxAttempts,
		RetryBackoffMs: sc.Template.RetryBackoff.Milliseconds(), Paused: sc.Paused,
		LastState: string(sc.LastState)}
	if !sc.NextRunAt.IsZero() {
		next := sc.NextRunAt
		v.NextRunAt = &next
	}
	if sc.LastExecutionID != uuid.Nil {
		v.LastExecutionID = sc.LastExecutionID.String()
	}
	return v
}

// spec shows a schedule's timing.
func spec(sc service.Schedule) string {
	if sc.Cron != "" {
		return "cron " + sc.Cron
	}
	return "every " + sc.Every.String()
}

func schedulesList(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace (default: all)")
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		scs, err := s.ListSchedules(ctx, *ns)
		if err != nil {
			return err
		}
		out := pageJSON[scheduleJSON]{Items: []scheduleJSON{}}
		var rows [][]string
		for _, sc := range scs {
			out.Items = append(out.Items, scheduleView(sc))
			state := "active"
			if sc.Paused {
				state = "paused"
			}
			rows = append(rows, []string{sc.Namespace, sc.Name, spec(sc), sc.Template.Lane, state, ts(sc.NextRunAt), orDash(string(sc.LastState))})
		}
		return c.print(out, []string{"NAMESPACE", "NAME", "SPEC", "LANE", "STATE", "NEXT RUN", "LAST RUN"}, rows, "")
	})
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// scheduleArgFields names the positional arguments of the schedules
// commands that take NAMESPACE NAME.
var scheduleArgFields = map[string]string{"Namespace": "NAMESPACE", "namespace": "NAMESPACE", "Name": "NAME", "name": "NAME"}

// scheduleKey checks the NAMESPACE and NAME arguments by the identifier
// rule: a refused one is a usage error naming it (an empty NAMESPACE never
// means "every namespace").
func (c *cli) scheduleKey() (namespace, name string, err error) {
	c.fields = scheduleArgFields
	switch {
	case c.args[0] == "":
		return "", "", usagef("invalid NAMESPACE: must not be empty (a schedule lives in one namespace)")
	}
	if err := service.CheckIdentifier("Namespace", c.args[0]); err != nil {
		return "", "", err
	}
	if err := service.CheckIdentifier("Name", c.args[1]); err != nil {
		return "", "", err
	}
	return c.args[0], c.args[1], nil
}

// withSchedule parses a schedules command of NAMESPACE NAME, checks the key
// (before anything is opened: a refused key touches no database), opens the
// Store for writing and calls fn.
func (c *cli) withSchedule(ctx context.Context, args []string, fn func(s *service.Store, ns, name string) error) error {
	c.keyedNamespace = true
	if err := c.parse(args, 2); err != nil {
		return err
	}
	ns, name, err := c.scheduleKey()
	if err != nil {
		return err
	}
	s, err := c.openWrite(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(s, ns, name)
}

func schedulesPut(ctx context.Context, c *cli, args []string) error {
	every := c.flags.Duration("every", 0, "run every this long, periods aligned to the Unix epoch (1s to 366 days)")
	cronSpec := c.flags.String("cron", "", "run at the times of this 5-field cron spec, in UTC")
	lane := c.flags.String("lane", "", "the lane of each run (required)")
	payload := c.flags.String("payload", "", "the payload of each run (text)")
	priority := c.flags.Int("priority", 0, "the priority of each run")
	maxAttempts := c.flags.Int("max-attempts", 0, "the attempts of each run (0: the Store's default)")
	backoff := c.flags.Duration("retry-backoff", 0, "the retry backoff of each run")
	paused := c.flags.Bool("paused", false, "create it paused")
	var caps stringList
	c.flags.Var(&caps, "capability", "a capability each run requires (repeat for several)")
	return c.withSchedule(ctx, args, func(s *service.Store, ns, name string) error {
		sc := service.Schedule{Namespace: ns, Name: name, Every: *every, Cron: *cronSpec, Paused: *paused,
			Template: service.CreateExecutionArgs{Lane: *lane, Payload: []byte(*payload), Priority: *priority,
				RequiredCapabilities: caps, MaxAttempts: *maxAttempts, RetryBackoff: *backoff}}
		if err := s.PutSchedule(ctx, sc); err != nil {
			return err
		}
		return c.printSchedule(ctx, s, sc.Namespace, sc.Name)
	})
}

// printSchedule prints one schedule as stored.
func (c *cli) printSchedule(ctx context.Context, s *service.Store, ns, name string) error {
	scs, err := s.ListSchedules(ctx, ns)
	if err != nil {
		return err
	}
	for _, sc := range scs {
		if sc.Namespace == ns && sc.Name == name {
			state := "active"
			if sc.Paused {
				state = "paused"
			}
			return c.print(scheduleView(sc), []string{"NAMESPACE", "NAME", "SPEC", "LANE", "STATE", "NEXT RUN"},
				[][]string{{sc.Namespace, sc.Name, spec(sc), sc.Template.Lane, state, ts(sc.NextRunAt)}}, "")
		}
	}
	return fmt.Errorf("%w: schedule %q in namespace %q", service.ErrNotFound, name, ns)
}

func schedulesDelete(ctx context.Context, c *cli, args []string) error {
	return c.withSchedule(ctx, args, func(s *service.Store, ns, name string) error {
		if err := s.DeleteSchedule(ctx, ns, name); err != nil {
			return err
		}
		return c.print(map[string]string{"deleted": name}, []string{"DELETED"}, [][]string{{name}}, "")
	})
}

func schedulesPause(ctx context.Context, c *cli, args []string) error {
	return setPaused(ctx, c, args, true)
}

func schedulesResume(ctx context.Context, c *cli, args []string) error {
	return setPaused(ctx, c, args, false)
}

// setPaused pauses or resumes a schedule (a resumed one runs from its next
// period on).
func setPaused(ctx context.Context, c *cli, args []string, paused bool) error {
	return c.withSchedule(ctx, args, func(s *service.Store, ns, name string) error {
		scs, err := s.ListSchedules(ctx, ns)
		if err != nil {
			return err
		}
		for _, sc := range scs {
			if sc.Namespace == ns && sc.Name == name {
				sc.Paused = paused
				sc.Template.Namespace = ""
				if err := s.PutSchedule(ctx, sc); err != nil {
					return err
				}
				return c.printSchedule(ctx, s, sc.Namespace, sc.Name)
			}
		}
		return fmt.Errorf("%w: schedule %q in namespace %q", service.ErrNotFound, name, ns)
	})
}

func leaderShow(ctx context.Context, c *cli, args []string) error {
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		id, until, err := s.Leader(ctx)
		if err != nil {
			return err
		}
		out := map[string]any{"leader": id, "until": nil}
		if id != "" {
			out["until"] = until
		}
		return c.print(out, []string{"LEADER", "UNTIL"}, [][]string{{orDash(id), ts(until)}}, "")
	})
}

// text is a payload as text when it is valid UTF-8 without control
// characters other than whitespace (nil otherwise).
func text(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	if !utf8.ValidString(s) {
		return nil
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' || r == 0x7f {
			return nil
		}
	}
	return &s
}
