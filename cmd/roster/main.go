// Command roster operates a roster database (a SQLite file or a PostgreSQL
// URL): migrations, workers, events, leases and agents, plus a
// self-contained demo.
//
//	roster [command] [subcommand] [flags]
//
// Every command takes --db PATH (default $ROSTER_DB, else roster.db) and
// --json (machine-readable output), and --help.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rosterdb/roster/service"
)

const usage = `roster operates a roster database (a SQLite file or a postgres:// URL).

Usage:
  roster migrate up|down|version|force [flags]
  roster workers list|sweep [flags]
  roster events list [flags]
  roster leases expired|reclaim [flags]
  roster agents list|get|terminate-live [flags]
  roster demo [flags]

Every command takes --db PATH|URL (default $ROSTER_DB, else roster.db), --json and --help.
Run "roster COMMAND SUBCOMMAND --help" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "roster: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	name := args[0]
	rest := args[1:]
	if cmd.subs != nil {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
				fmt.Fprintf(stdout, "Usage: roster %s %s\n", name, cmd.subList)
				return 0
			}
			fmt.Fprintf(stderr, "roster %s: missing subcommand (%s)\n", name, cmd.subList)
			return 2
		}
		sub, ok := cmd.subs[rest[0]]
		if !ok {
			fmt.Fprintf(stderr, "roster %s: unknown subcommand %q (%s)\n", name, rest[0], cmd.subList)
			return 2
		}
		name += " " + rest[0]
		rest = rest[1:]
		cmd = sub
	}
	c := &cli{name: name, stdout: stdout, stderr: stderr}
	c.flags = flag.NewFlagSet("roster "+name, flag.ContinueOnError)
	c.flags.SetOutput(stderr)
	dbDefault := os.Getenv("ROSTER_DB")
	if dbDefault == "" {
		dbDefault = "roster.db"
	}
	c.flags.StringVar(&c.db, "db", dbDefault, "database: a SQLite file path or a postgres:// URL")
	c.flags.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	c.flags.Usage = func() {
		fmt.Fprintf(c.flags.Output(), "Usage: roster %s [flags]%s\n\n%s\n\nFlags:\n", name, cmd.args, cmd.help)
		c.flags.PrintDefaults()
	}
	if err := cmd.run(ctx, c, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, errUsage) {
			return 2
		}
		fmt.Fprintf(stderr, "roster %s: %v\n", name, err)
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

type cli struct {
	name           string
	flags          *flag.FlagSet
	db             string
	json           bool
	args           []string // positional arguments
	stdout, stderr io.Writer
}

// parse parses the command's flags, which may stand before or after its
// positional arguments, and checks how many positional arguments there are.
func (c *cli) parse(args []string, positional int) error {
	for {
		if err := c.flags.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsage
		}
		args = c.flags.Args()
		if len(args) == 0 {
			break
		}
		c.args = append(c.args, args[0])
		args = args[1:]
	}
	if len(c.args) != positional {
		fmt.Fprintf(c.stderr, "roster %s: want %d argument(s), got %d\n", c.name, positional, len(c.args))
		c.flags.Usage()
		return errUsage
	}
	return nil
}

// open opens the Store on an existing database (it refuses to create a file
// by accident).
func (c *cli) open(ctx context.Context) (*service.Store, error) {
	if !isURL(c.db) {
		if _, err := os.Stat(c.db); err != nil {
			return nil, fmt.Errorf("no database at %s (pass --db, or run 'roster migrate up --db %s' to create one)", c.db, c.db)
		}
	}
	return service.Open(ctx, c.db)
}

// isURL reports whether a --db value names a PostgreSQL database.
func isURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// displayDB is a --db value fit to print: a URL's password is never shown.
func displayDB(db string) string {
	if !isURL(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "(an unparsable PostgreSQL URL)"
	}
	return u.Redacted()
}

// withStore parses the flags, opens the database and runs fn on it.
func (c *cli) withStore(ctx context.Context, args []string, positional int, fn func(s *service.Store) error) error {
	if err := c.parse(args, positional); err != nil {
		return err
	}
	s, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(s)
}

// countCommand is a command that runs one maintenance call and prints how
// many rows it touched under the given name.
func countCommand(name string, call func(ctx context.Context, s *service.Store, limit int) (int, error), withLimit bool) func(context.Context, *cli, []string) error {
	return func(ctx context.Context, c *cli, args []string) error {
		limit := new(int)
		if withLimit {
			limit = c.flags.Int("limit", 0, "at most this many (0 = all)")
		}
		return c.withStore(ctx, args, 0, func(s *service.Store) error {
			n, err := call(ctx, s, *limit)
			if err != nil {
				return err
			}
			return c.print(map[string]int{name: n}, []string{strings.ToUpper(name)}, [][]string{{strconv.Itoa(n)}}, "")
		})
	}
}

// print writes v as JSON, or the rows as an aligned table.
func (c *cli) print(v any, header []string, rows [][]string, footer string) error {
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if footer != "" {
		fmt.Fprintln(c.stdout, footer)
	}
	return nil
}

type command struct {
	args    string
	help    string
	run     func(ctx context.Context, c *cli, args []string) error
	subs    map[string]*command
	subList string
}

var commands = map[string]*command{
	"migrate": {subList: "up|down|version|force", subs: map[string]*command{
		"up":      {help: "Apply every pending migration (creates the file if absent).", run: migrateUp},
		"down":    {help: "Roll back migrations, in one transaction.", run: migrateDown},
		"version": {help: "Print the schema version and the latest this build knows.", run: migrateVersion},
		"force":   {args: " VERSION", help: "Record VERSION as the schema version without running migrations (repair).", run: migrateForce},
	}},
	"workers": {subList: "list|sweep", subs: map[string]*command{
		"list": {help: "List workers in (namespace, instance) order.", run: workersList},
		"sweep": {help: "Delete every worker whose TTL has lapsed and expire its leases.", run: countCommand("swept",
			func(ctx context.Context, s *service.Store, _ int) (int, error) {
				return s.SweepExpiredWorkers(ctx, time.Time{})
			}, false)},
	}},
	"events": {subList: "list", subs: map[string]*command{
		"list": {help: "Read the worker audit log in Seq order.", run: eventsList},
	}},
	"leases": {subList: "expired|reclaim", subs: map[string]*command{
		"expired": {help: "List running leases past their expiry.", run: leasesExpired},
		"reclaim": {help: "Reclaim expired leases: retry or fail their executions.", run: countCommand("reclaimed",
			func(ctx context.Context, s *service.Store, limit int) (int, error) {
				return s.ReclaimExpiredLeases(ctx, time.Time{}, limit)
			}, true)},
	}},
	"agents": {subList: "list|get|terminate-live", subs: map[string]*command{
		"list": {help: "List agents in id order.", run: agentsList},
		"get":  {args: " ID", help: "Show one agent.", run: agentsGet},
		"terminate-live": {help: "End every live agent with reason host_restart (the boot scan).", run: countCommand("terminated",
			func(ctx context.Context, s *service.Store, _ int) (int, error) {
				return s.TerminateLiveAgents(ctx, time.Time{})
			}, false)},
	}},
	"demo": {help: "Run a small fleet end to end on a temporary database file (or --db).", run: demo},
}

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
	return migrateVersionPrint(ctx, c)
}

func migrateDown(ctx context.Context, c *cli, args []string) error {
	steps := c.flags.Int("steps", 1, "how many migrations to roll back (0 = all)")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	if err := service.MigrateDown(ctx, c.db, *steps); err != nil {
		return err
	}
	return migrateVersionPrint(ctx, c)
}

func migrateVersion(ctx context.Context, c *cli, args []string) error {
	if err := c.parse(args, 0); err != nil {
		return err
	}
	return migrateVersionPrint(ctx, c)
}

func migrateForce(ctx context.Context, c *cli, args []string) error {
	if err := c.parse(args, 1); err != nil {
		return err
	}
	v, err := strconv.Atoi(c.args[0])
	if err != nil {
		return fmt.Errorf("VERSION %q is not a number", c.args[0])
	}
	if err := service.ForceVersion(ctx, c.db, v); err != nil {
		return err
	}
	return migrateVersionPrint(ctx, c)
}

func migrateVersionPrint(ctx context.Context, c *cli) error {
	v, latest, err := service.SchemaVersion(ctx, c.db)
	if err != nil {
		return err
	}
	out := struct {
		Version int `json:"version"`
		Latest  int `json:"latest"`
	}{v, latest}
	return c.print(out, []string{"VERSION", "LATEST"}, [][]string{{strconv.Itoa(v), strconv.Itoa(latest)}}, "")
}

func workersList(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace (default: all)")
	after := c.flags.String("after", "", "the Next cursor of the previous page")
	limit := c.flags.Int("limit", 100, "page size (at most 10000)")
	return c.withStore(ctx, args, 0, func(s *service.Store) error {
		page, err := s.ListWorkers(ctx, service.ListWorkersArgs{Namespace: *ns, After: *after, Limit: *limit})
		if err != nil {
			return err
		}
		now := time.Now()
		var rows [][]string
		for _, w := range page.Workers {
			state := "alive"
			if !now.Before(w.ExpiresAt()) {
				state = "lapsed"
			}
			rows = append(rows, []string{w.Namespace, w.InstanceID, w.WorkerID, strings.Join(quoteAll(w.Lanes), ","),
				strings.Join(quoteAll(w.Capabilities), ","), w.LastHeartbeat.Format(time.RFC3339Nano), w.TTL.String(), state})
		}
		return c.print(page, []string{"NAMESPACE", "INSTANCE", "WORKER", "LANES", "CAPABILITIES", "LAST HEARTBEAT", "TTL", "STATE"},
			rows, nextFooter(page.Next))
	})
}

func eventsList(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace")
	inst := c.flags.String("instance", "", "only this instance")
	afterSeq := c.flags.Int64("after-seq", 0, "only events with a greater Seq")
	limit := c.flags.Int("limit", 100, "how many events (at most 10000)")
	return c.withStore(ctx, args, 0, func(s *service.Store) error {
		events, err := s.ListWorkerEvents(ctx, service.ListWorkerEventsArgs{Namespace: *ns, InstanceID: *inst, AfterSeq: *afterSeq, Limit: *limit})
		if err != nil {
			return err
		}
		var rows [][]string
		for _, e := range events {
			rows = append(rows, []string{strconv.FormatInt(e.Seq, 10), e.At.Format(time.RFC3339Nano), e.Namespace, e.InstanceID, string(e.Kind), e.Reason})
		}
		return c.print(events, []string{"SEQ", "AT", "NAMESPACE", "INSTANCE", "KIND", "REASON"}, rows, "")
	})
}

func leasesExpired(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace (default: all)")
	after := c.flags.String("after", "", "the Next cursor of the previous page")
	limit := c.flags.Int("limit", 100, "page size (at most 10000)")
	return c.withStore(ctx, args, 0, func(s *service.Store) error {
		page, err := s.ListExpiredLeases(ctx, service.ListExpiredLeasesArgs{Namespace: *ns, After: *after, Limit: *limit})
		if err != nil {
			return err
		}
		var rows [][]string
		for _, l := range page.Leases {
			rows = append(rows, []string{l.ExpiresAt.Format(time.RFC3339Nano), l.ExecutionID.String(), l.LeaseID.String(),
				strconv.Itoa(l.AttemptIndex), strconv.FormatInt(l.Epoch, 10), l.Namespace, l.InstanceID})
		}
		return c.print(page, []string{"EXPIRED AT", "EXECUTION", "LEASE", "ATTEMPT", "EPOCH", "NAMESPACE", "HOLDER"}, rows, nextFooter(page.Next))
	})
}

func agentsList(ctx context.Context, c *cli, args []string) error {
	state := c.flags.String("state", "", "only this state (spawned, running, suspended, terminal)")
	owner := c.flags.String("owner", "", "only this owner actor")
	visible := c.flags.String("visible-in", "", "only agents visible in this namespace")
	after := c.flags.String("after", "", "the Next cursor of the previous page")
	limit := c.flags.Int("limit", 100, "page size (at most 10000)")
	return c.withStore(ctx, args, 0, func(s *service.Store) error {
		page, err := s.ListAgents(ctx, service.ListAgentsArgs{State: service.AgentState(*state), OwnerActor: *owner, VisibleIn: *visible, After: *after, Limit: *limit})
		if err != nil {
			return err
		}
		var rows [][]string
		for _, a := range page.Agents {
			rows = append(rows, agentRow(a))
		}
		return c.print(page, agentHeader, rows, nextFooter(page.Next))
	})
}

var agentHeader = []string{"ID", "STATE", "REASON", "PROVIDER", "SESSION", "OWNER", "WRITE NS", "CHANGED AT"}

func agentRow(a service.Agent) []string {
	return []string{a.ID, string(a.State), string(a.TerminalReason), a.Provider, a.ProviderSessionID, a.OwnerActor,
		a.OwnerWriteNamespace, a.StateChangedAt.Format(time.RFC3339Nano)}
}

func agentsGet(ctx context.Context, c *cli, args []string) error {
	return c.withStore(ctx, args, 1, func(s *service.Store) error {
		a, err := s.GetAgent(ctx, c.args[0])
		if err != nil {
			return err
		}
		return c.print(a, agentHeader, [][]string{agentRow(a)}, "")
	})
}

func nextFooter(next string) string {
	if next == "" {
		return ""
	}
	return "next page: --after " + next
}

// quoteAll quotes the elements that contain a comma, so a joined list reads
// unambiguously.
func quoteAll(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		if strings.ContainsAny(v, ", \"") {
			v = strconv.Quote(v)
		}
		out[i] = v
	}
	return out
}
