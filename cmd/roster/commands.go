package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/service"
)

// Migrations.

func migrateUp(ctx context.Context, c *cli, args []string) error {
	if err := c.parse(args, 0); err != nil {
		return err
	}
	s, err := service.Open(ctx, c.db)
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	return printVersion(ctx, c)
}

func migrateDown(ctx context.Context, c *cli, args []string) error {
	steps := c.flags.Int("steps", 1, "how many migrations to roll back (0 = all)")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	if err := c.exists(); err != nil {
		return err
	}
	if err := service.MigrateDown(ctx, c.db, *steps); err != nil {
		return err
	}
	return printVersion(ctx, c)
}

func migrateVersion(ctx context.Context, c *cli, args []string) error {
	if err := c.parse(args, 0); err != nil {
		return err
	}
	if err := c.exists(); err != nil {
		return err
	}
	return printVersion(ctx, c)
}

func migrateForce(ctx context.Context, c *cli, args []string) error {
	if err := c.parse(args, 1); err != nil {
		return err
	}
	v, err := strconv.Atoi(c.args[0])
	if err != nil {
		return usagef("VERSION %q is not a number", c.args[0])
	}
	if err := c.exists(); err != nil {
		return err
	}
	if err := service.ForceVersion(ctx, c.db, v); err != nil {
		return err
	}
	return printVersion(ctx, c)
}

// exists refuses a database file that does not exist (the migrate commands
// other than up never create one).
func (c *cli) exists() error {
	if isURL(c.db) {
		return nil
	}
	if _, err := os.Stat(c.db); err != nil {
		return c.missing()
	}
	return nil
}

// printVersion prints the schema version and the latest this build knows.
// A database without any migration applied (service.SchemaVersion's -1) has
// no version: "none" in the table, with a line saying so, and null in JSON.
func printVersion(ctx context.Context, c *cli) error {
	v, latest, err := service.SchemaVersion(ctx, c.db)
	if err != nil {
		return err
	}
	out := struct {
		Version *int `json:"version"` // null: no migration applied
		Latest  int  `json:"latest"`
	}{Latest: latest}
	shown, footer := "none", "no migrations applied; "+c.migrateUpHint("apply them")
	if v >= 0 {
		out.Version, shown, footer = &v, strconv.Itoa(v), ""
	}
	return c.print(out, []string{"VERSION", "LATEST"}, [][]string{{shown, strconv.Itoa(latest)}}, footer)
}

// Workers.

func workersList(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace (default: all)")
	after := c.flags.String("after", "", "the cursor printed after the previous page")
	limit := c.flags.Int("limit", 100, "page size (0 = 1000, at most 10000)")
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		page, err := s.ListWorkers(ctx, service.ListWorkersArgs{Namespace: *ns, After: *after, Limit: *limit})
		if err != nil {
			return err
		}
		now := time.Now()
		out := pageJSON[workerJSON]{Items: []workerJSON{}, Next: page.Next}
		var rows [][]string
		for _, w := range page.Workers {
			v := workerView(w, now)
			out.Items = append(out.Items, v)
			state := "alive"
			if !v.Alive {
				state = "lapsed"
			}
			rows = append(rows, []string{w.Namespace, w.InstanceID, w.WorkerID, list(w.Lanes), list(w.Capabilities),
				ts(w.LastHeartbeat), strconv.FormatInt(w.TTL.Milliseconds(), 10), state})
		}
		return c.print(out, []string{"NAMESPACE", "INSTANCE", "WORKER", "LANES", "CAPABILITIES", "LAST HEARTBEAT", "TTL MS", "STATE"},
			rows, nextFooter(page.Next))
	})
}

func workersSweep(ctx context.Context, c *cli, args []string) error {
	return c.withWrite(ctx, args, 0, func(s *service.Store) error {
		n, err := s.SweepExpiredWorkers(ctx, time.Time{})
		if err != nil {
			return err
		}
		return c.print(map[string]int{"swept": n}, []string{"SWEPT"}, [][]string{{strconv.Itoa(n)}}, "")
	})
}

// Events.

func eventsList(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace")
	inst := c.flags.String("instance", "", "only this instance")
	afterSeq := c.flags.Int64("after-seq", 0, "only events with a greater Seq")
	limit := c.flags.Int("limit", 100, "how many events (0 = 1000, at most 10000)")
	follow := c.flags.Bool("follow", false, "keep printing new events until interrupted (JSON: one object per line)")
	interval := c.flags.Duration("interval", 500*time.Millisecond, "with --follow: how often to look for new events")
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		if *follow && *interval <= 0 {
			return usagef("invalid --interval: %v is not positive", *interval)
		}
		a := service.ListWorkerEventsArgs{Namespace: *ns, InstanceID: *inst, AfterSeq: *afterSeq, Limit: *limit}
		events, err := s.ListWorkerEvents(ctx, a)
		if err != nil {
			return err
		}
		if !*follow {
			out := struct {
				Items []eventJSON `json:"items"`
			}{Items: []eventJSON{}}
			var rows [][]string
			for _, e := range events {
				out.Items = append(out.Items, eventView(e))
				rows = append(rows, eventRow(e))
			}
			return c.print(out, eventHeader, rows, "")
		}
		return c.followEvents(ctx, s, a, events, *interval)
	})
}

var eventHeader = []string{"SEQ", "AT", "NAMESPACE", "INSTANCE", "KIND", "REASON"}

func eventRow(e service.WorkerEvent) []string {
	return []string{strconv.FormatInt(e.Seq, 10), ts(e.At), e.Namespace, e.InstanceID, string(e.Kind), orDash(e.Reason)}
}

// followEvents prints events as they come, until ctx ends.
func (c *cli) followEvents(ctx context.Context, s *service.Store, a service.ListWorkerEventsArgs, first []service.WorkerEvent, interval time.Duration) error {
	if !c.json {
		fmt.Fprintln(c.stdout, strings.Join(eventHeader, "\t"))
	}
	emit := func(events []service.WorkerEvent) {
		for _, e := range events {
			if c.json {
				b, _ := jsonLine(eventView(e))
				fmt.Fprintln(c.stdout, b)
			} else {
				fmt.Fprintln(c.stdout, strings.Join(eventRow(e), "\t"))
			}
			a.AfterSeq = e.Seq
		}
	}
	emit(first)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		events, err := s.ListWorkerEvents(ctx, a)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		emit(events)
	}
}

func eventsPrune(ctx context.Context, c *cli, args []string) error {
	olderThan := c.flags.Duration("older-than", service.DefaultEventRetention, "delete the events older than this")
	return c.withWrite(ctx, args, 0, func(s *service.Store) error {
		if *olderThan < 0 {
			return usagef("invalid --older-than: %v is negative", *olderThan)
		}
		n, err := s.PruneWorkerEvents(ctx, agoFromNow(*olderThan))
		if err != nil {
			return err
		}
		return c.print(map[string]int{"pruned": n}, []string{"PRUNED"}, [][]string{{strconv.Itoa(n)}}, "")
	})
}

// Executions.

var executionHeader = []string{"ID", "NAMESPACE", "LANE", "STATE", "PRIORITY", "ATTEMPTS", "RUN AT", "HOLDER", "LEASE EXPIRES", "PAYLOAD", "LAST ERROR"}

// executionRow is an execution's line in a list: a running one shows its
// holder and lease expiry.
func executionRow(e service.Execution) []string {
	holder, expires := "-", "-"
	if e.State == service.ExecutionRunning {
		holder, expires = e.Holder, ts(e.LeaseExpiresAt)
	}
	return []string{e.ID.String(), e.Namespace, e.Lane, string(e.State), strconv.Itoa(e.Priority),
		fmt.Sprintf("%d/%d", e.Attempts, e.MaxAttempts), ts(e.RunAt), holder, expires, preview(e.Payload), orDash(e.LastError)}
}

// executionFields is one execution as FIELD VALUE lines, every field shown.
func executionFields(e service.Execution) [][]string {
	return [][]string{
		{"id", e.ID.String()}, {"namespace", e.Namespace}, {"lane", e.Lane}, {"state", string(e.State)},
		{"priority", strconv.Itoa(e.Priority)}, {"attempts", fmt.Sprintf("%d of %d", e.Attempts, e.MaxAttempts)},
		{"reclaim_count", strconv.Itoa(e.ReclaimCount)}, {"required_capabilities", list(e.RequiredCapabilities)},
		{"unique_key", orDash(e.UniqueKey)}, {"created_at", ts(e.CreatedAt)}, {"run_at", ts(e.RunAt)},
		{"retry_backoff", e.RetryBackoff.String()}, {"holder", orDash(e.Holder)}, {"claimed_at", ts(e.ClaimedAt)},
		{"lease_expires_at", ts(e.LeaseExpiresAt)}, {"finished_at", ts(e.FinishedAt)}, {"last_error", orDash(e.LastError)},
		{"payload", preview(e.Payload)}, {"result", preview(e.Result)}, {"metadata", metadataCell(e.Metadata)},
	}
}

func executionsList(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace (default: all)")
	lane := c.flags.String("lane", "", "only this lane")
	state := c.flags.String("state", "", "only this state (waiting, running, completed, failed, cancelled)")
	after := c.flags.String("after", "", "the cursor printed after the previous page")
	limit := c.flags.Int("limit", 100, "page size (0 = 1000, at most 10000)")
	newest := c.flags.Bool("newest", false, "newest first (a cursor from --after belongs to one order)")
	key := c.flags.String("unique-key", "", "only the executions created with this unique key, finished ones too (needs --namespace)")
	group := c.flags.String("group", "", "only the executions of this group (needs --namespace)")
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		page, err := s.ListExecutions(ctx, service.ListExecutionsArgs{Namespace: *ns, Lane: *lane, State: service.ExecutionState(*state),
			UniqueKey: *key, Group: *group, After: *after, Limit: *limit, NewestFirst: *newest})
		if err != nil {
			return err
		}
		out := pageJSON[executionJSON]{Items: []executionJSON{}, Next: page.Next}
		var rows [][]string
		for _, e := range page.Executions {
			out.Items = append(out.Items, executionView(e))
			rows = append(rows, executionRow(e))
		}
		return c.print(out, executionHeader, rows, nextFooter(page.Next))
	})
}

func (c *cli) executionID() (uuid.UUID, error) {
	id, err := uuid.Parse(c.args[0])
	if err != nil {
		return uuid.Nil, usagef("invalid ID: %q is not an execution id", c.args[0])
	}
	return id, nil
}

func executionsGet(ctx context.Context, c *cli, args []string) error {
	return c.withRead(ctx, args, 1, func(s *service.Store) error {
		id, err := c.executionID()
		if err != nil {
			return err
		}
		e, err := s.GetExecution(ctx, id)
		if err != nil {
			return err
		}
		as, err := s.ListAttempts(ctx, id)
		if err != nil {
			return err
		}
		rows := executionFields(e)
		for _, a := range as {
			r := attemptRow(a)
			rows = append(rows, []string{"attempt " + r[0], strings.Join(r[1:], "  ")})
		}
		return c.print(executionDetailJSON{executionJSON: executionView(e), AttemptHistory: attemptViews(as)},
			[]string{"FIELD", "VALUE"}, rows, "")
	})
}

func executionsPrune(ctx context.Context, c *cli, args []string) error {
	olderThan := c.flags.Duration("older-than", service.DefaultExecutionRetention, "delete the executions that finished longer ago than this")
	return c.withWrite(ctx, args, 0, func(s *service.Store) error {
		if *olderThan < 0 {
			return usagef("invalid --older-than: %v is negative", *olderThan)
		}
		n, err := s.PruneExecutions(ctx, agoFromNow(*olderThan))
		if err != nil {
			return err
		}
		return c.print(map[string]int{"pruned": n}, []string{"PRUNED"}, [][]string{{strconv.Itoa(n)}}, "")
	})
}

// Leases.

func leasesExpired(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace (default: all)")
	after := c.flags.String("after", "", "the cursor printed after the previous page")
	limit := c.flags.Int("limit", 100, "page size (0 = 1000, at most 10000)")
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		page, err := s.ListExpiredLeases(ctx, service.ListExpiredLeasesArgs{Namespace: *ns, After: *after, Limit: *limit})
		if err != nil {
			return err
		}
		out := pageJSON[expiredLeaseJSON]{Items: []expiredLeaseJSON{}, Next: page.Next}
		var rows [][]string
		for _, l := range page.Leases {
			out.Items = append(out.Items, expiredLeaseView(l))
			rows = append(rows, []string{ts(l.ExpiresAt), l.ExecutionID.String(), l.LeaseID.String(),
				strconv.Itoa(l.AttemptIndex), strconv.FormatInt(l.Epoch, 10), l.Namespace, l.InstanceID})
		}
		return c.print(out, []string{"EXPIRED AT", "EXECUTION", "LEASE", "ATTEMPT", "EPOCH", "NAMESPACE", "HOLDER"}, rows, nextFooter(page.Next))
	})
}

func leasesReclaim(ctx context.Context, c *cli, args []string) error {
	limit := c.flags.Int("limit", 0, "at most this many (0 = all)")
	return c.withWrite(ctx, args, 0, func(s *service.Store) error {
		n, err := s.ReclaimExpiredLeases(ctx, time.Time{}, *limit)
		if err != nil {
			return err
		}
		return c.print(map[string]int{"reclaimed": n}, []string{"RECLAIMED"}, [][]string{{strconv.Itoa(n)}}, "")
	})
}

// Agents.

var agentHeader = []string{"ID", "STATE", "REASON", "PROVIDER", "SESSION", "OWNER", "WRITE NS", "HOST", "HOLDER", "CHANGED AT"}

func agentRow(a service.Agent) []string {
	holder := "-"
	if a.HolderNamespace != "" {
		holder = a.HolderNamespace + "/" + a.HolderInstanceID
	}
	return []string{a.ID, string(a.State), orDash(string(a.TerminalReason)), a.Provider, orDash(a.ProviderSessionID), a.OwnerActor,
		a.OwnerWriteNamespace, orDash(a.Host), holder, ts(a.StateChangedAt)}
}

// parseHolder splits --holder NAMESPACE/INSTANCE at its first "/" ("" = any).
func parseHolder(v string) (namespace, instanceID string, err error) {
	if v == "" {
		return "", "", nil
	}
	namespace, instanceID, ok := strings.Cut(v, "/")
	if !ok || namespace == "" || instanceID == "" {
		return "", "", usagef("invalid --holder: %q is not NAMESPACE/INSTANCE", v)
	}
	return namespace, instanceID, nil
}

func agentsList(ctx context.Context, c *cli, args []string) error {
	state := c.flags.String("state", "", "only this state (spawned, running, suspended, terminal)")
	owner := c.flags.String("owner", "", "only this owner actor")
	visible := c.flags.String("visible-in", "", "only agents visible in this namespace")
	host := c.flags.String("host", "", "only the agents of this host")
	holder := c.flags.String("holder", "", "only the agents held by this worker registration, NAMESPACE/INSTANCE (split at the first /)")
	after := c.flags.String("after", "", "the cursor printed after the previous page")
	limit := c.flags.Int("limit", 100, "page size (0 = 1000, at most 10000)")
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		holderNS, holderID, err := parseHolder(*holder)
		if err != nil {
			return err
		}
		page, err := s.ListAgents(ctx, service.ListAgentsArgs{
			State: service.AgentState(*state), OwnerActor: *owner, VisibleIn: *visible, Host: *host,
			HolderNamespace: holderNS, HolderInstanceID: holderID, After: *after, Limit: *limit,
		})
		if err != nil {
			return err
		}
		out := pageJSON[agentJSON]{Items: []agentJSON{}, Next: page.Next}
		var rows [][]string
		for _, a := range page.Agents {
			out.Items = append(out.Items, agentView(a))
			rows = append(rows, agentRow(a))
		}
		return c.print(out, agentHeader, rows, nextFooter(page.Next))
	})
}

func agentsGet(ctx context.Context, c *cli, args []string) error {
	return c.withRead(ctx, args, 1, func(s *service.Store) error {
		a, err := s.GetAgent(ctx, c.args[0])
		if err != nil {
			return err
		}
		return c.print(agentView(a), agentHeader, [][]string{agentRow(a)}, "")
	})
}

func agentsTerminateLive(ctx context.Context, c *cli, args []string) error {
	host := c.flags.String("host", "", "only the live agents of this host (the boot scan on a shared database)")
	allHosts := c.flags.Bool("all-hosts", false, "end every live agent of every host (needed without --host on PostgreSQL, or when a live agent names a host)")
	return c.withWrite(ctx, args, 0, func(s *service.Store) error {
		if *host != "" && *allHosts {
			return usagef("--host and --all-hosts exclude each other")
		}
		var n int
		var err error
		if *host != "" {
			n, err = s.TerminateLiveAgentsOnHost(ctx, *host, time.Time{})
		} else {
			if !*allHosts {
				if err := refuseSharedTerminate(ctx, c, s); err != nil {
					return err
				}
			}
			n, err = s.TerminateLiveAgents(ctx, time.Time{})
		}
		if err != nil {
			return err
		}
		return c.print(map[string]int{"terminated": n}, []string{"TERMINATED"}, [][]string{{strconv.Itoa(n)}}, "")
	})
}

// refuseSharedTerminate refuses to end every host's live agents on a
// database that many hosts share: any PostgreSQL database, or one where a
// live agent names a host.
func refuseSharedTerminate(ctx context.Context, c *cli, s *service.Store) error {
	const ask = "give --host HOST to end one host's live agents, or --all-hosts to end every host's"
	if isURL(c.db) {
		return usagef("terminate-live would end the live agents of every host sharing this PostgreSQL database; %s", ask)
	}
	for _, st := range []service.AgentState{service.AgentSpawned, service.AgentRunning, service.AgentSuspended} {
		for after := ""; ; {
			page, err := s.ListAgents(ctx, service.ListAgentsArgs{State: st, After: after})
			if err != nil {
				return err
			}
			for _, a := range page.Agents {
				if a.Host != "" {
					return usagef("terminate-live would end the live agents of every host, and live agent %q runs on host %q; %s", a.ID, a.Host, ask)
				}
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
	}
	return nil
}

// Maintenance, stats and checks.

func sweep(ctx context.Context, c *cli, args []string) error {
	retention := c.flags.Duration("retention", service.DefaultEventRetention, "keep the audit events of this long (negative: keep all)")
	execRetention := c.flags.Duration("execution-retention", service.DefaultExecutionRetention,
		"keep the executions that finished this long ago (negative: keep all)")
	return c.withWrite(ctx, args, 0, func(s *service.Store) error {
		if *retention == 0 {
			return usagef("invalid --retention: 0 would prune every event; give a duration, or a negative one to keep all")
		}
		if *execRetention == 0 {
			return usagef("invalid --execution-retention: 0 would prune every finished execution; give a duration, or a negative one to keep all")
		}
		r, err := s.Sweep(ctx, time.Time{}, service.SweeperArgs{EventRetention: *retention, ExecutionRetention: *execRetention})
		if err != nil {
			return err
		}
		out := map[string]int{"swept": r.Swept, "reclaimed": r.Reclaimed, "pruned": r.Pruned, "pruned_executions": r.PrunedExecutions,
			"scheduled": r.Scheduled}
		return c.print(out, []string{"SWEPT", "RECLAIMED", "PRUNED", "PRUNED EXECUTIONS", "SCHEDULED"},
			[][]string{{strconv.Itoa(r.Swept), strconv.Itoa(r.Reclaimed), strconv.Itoa(r.Pruned), strconv.Itoa(r.PrunedExecutions),
				strconv.Itoa(r.Scheduled)}}, "")
	})
}

func stats(ctx context.Context, c *cli, args []string) error {
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		st, err := s.Stats(ctx, time.Time{})
		if err != nil {
			return err
		}
		var rows [][]string
		for _, ns := range st.Namespaces {
			rows = append(rows, []string{ns.Namespace, "-", strconv.Itoa(ns.WorkersAlive), strconv.Itoa(ns.WorkersLapsed),
				strconv.Itoa(ns.ExpiredLeases), "-", "-", "-", "-"})
			for _, l := range ns.Lanes {
				age := "-"
				if !l.OldestReadyRunAt.IsZero() {
					age = st.At.Sub(l.OldestReadyRunAt).Round(time.Millisecond).String()
				}
				lane := l.Lane
				if l.Unserved() {
					lane += " (ready, no alive worker)"
				}
				rows = append(rows, []string{ns.Namespace, lane, strconv.Itoa(l.WorkersAlive), "", "", strconv.Itoa(l.Ready), strconv.Itoa(l.Scheduled),
					strconv.Itoa(l.Running), age})
			}
		}
		footer := fmt.Sprintf("agents: spawned %d, running %d, suspended %d, terminal %d (at %s)",
			st.Agents[service.AgentSpawned], st.Agents[service.AgentRunning], st.Agents[service.AgentSuspended],
			st.Agents[service.AgentTerminal], ts(st.At))
		if st.Leader != "" {
			footer += fmt.Sprintf("\nmaintenance leader: %s (until %s)", st.Leader, ts(st.LeaderUntil))
		} else {
			footer += "\nmaintenance leader: none"
		}
		return c.print(statsView(st), []string{"NAMESPACE", "LANE", "ALIVE", "LAPSED", "EXPIRED LEASES", "READY", "SCHEDULED", "RUNNING", "OLDEST READY"},
			rows, footer)
	})
}

// errProblems is check's failure: problems were found (exit 1).
var errProblems = errors.New("problems found")

func check(ctx context.Context, c *cli, args []string) error {
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		problems, err := s.Check(ctx)
		if err != nil {
			return err
		}
		out := struct {
			OK       bool     `json:"ok"`
			Problems []string `json:"problems"`
		}{len(problems) == 0, append([]string{}, problems...)}
		var rows [][]string
		for _, p := range problems {
			rows = append(rows, []string{p})
		}
		if len(rows) == 0 {
			rows = [][]string{{"ok: no problem found"}}
		}
		if err := c.print(out, []string{"CHECK"}, rows, ""); err != nil {
			return err
		}
		if len(problems) > 0 {
			return fmt.Errorf("%w: %d", errProblems, len(problems))
		}
		return nil
	})
}
