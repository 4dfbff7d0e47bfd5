// Command roster operates a roster database (a SQLite file or a PostgreSQL
// URL): migrations, workers, events, executions, leases, agents, stats, a
// health check, a status page, and a self-contained demo.
//
//	roster COMMAND [SUBCOMMAND] [flags]
//
// Every command takes --db PATH|URL (default $ROSTER_DB, else roster.db),
// --json and --help. Commands that only read open the database read-only:
// they never migrate or create anything. Exit status: 0 on success, 2 on a
// usage error (an unknown command or flag, a bad flag value), 1 otherwise.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rosterdb/roster/internal/connstr"
	"github.com/rosterdb/roster/service"
)

const usage = `roster operates a roster database (a SQLite file or a postgres:// URL).

Usage:
  roster migrate up|down|version|force      schema migrations
  roster workers list|sweep                 the worker registry
  roster events list|prune                  the audit log (list --follow tails it)
  roster executions list|get|create|attempts|cancel|retry|prune  the execution queue
  roster leases expired|reclaim             expired leases
  roster agents list|get|terminate-live     the agent ledger
  roster schedules list|put|delete|pause|resume  periodic executions
  roster leader                             who leads the fleet's maintenance
  roster sweep                              one full maintenance run
  roster stats                              the fleet at a glance
  roster check                              look for damage in the database
  roster serve                              a status page, JSON, /metrics and /healthz
  roster demo                               a small fleet on a fresh temporary database

Every command takes --db PATH|URL (default $ROSTER_DB, else roster.db), --json and --help.
Commands that only read never migrate or create a database.
Run "roster COMMAND SUBCOMMAND --help" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks a usage error (exit 2); its message was already printed.
var errUsage = errors.New("usage")

// usageError is a usage error with a message to print.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, nil, stdout, stderr)
}

// runWith is run with stdin given (nil: os.Stdin).
func runWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	wantsJSON := contains(args, "--json") || contains(args, "-json")
	c := &cli{stdout: stdout, stdin: stdin, stderr: stderr, json: wantsJSON, argv: args}
	fail := func(code int, msg string) int {
		printError(stderr, wantsJSON, c.scrub("roster: "+msg))
		return code
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return fail(2, fmt.Sprintf("unknown command %q (run roster --help)", args[0]))
	}
	name, rest := args[0], args[1:]
	if cmd.subs != nil {
		if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
			printSubcommands(stdout, name, cmd)
			return 0
		}
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return fail(2, fmt.Sprintf("%s: missing subcommand (%s)", name, cmd.subList))
		}
		sub, ok := cmd.subs[rest[0]]
		if !ok {
			return fail(2, fmt.Sprintf("%s: unknown subcommand %q (%s)", name, rest[0], cmd.subList))
		}
		name += " " + rest[0]
		rest = rest[1:]
		cmd = sub
	}
	c.name = name
	c.flags = flag.NewFlagSet("roster "+name, flag.ContinueOnError)
	c.flags.SetOutput(io.Discard)
	// Parse reports -h and bad flags as errors; the help is printed below,
	// once, and a usage error is one line on stderr.
	c.flags.Usage = func() {}
	c.envStringVar(&c.db, "db", "ROSTER_DB", "roster.db", "the database: a SQLite file path or a postgres:// URL", false)
	c.flags.BoolVar(&c.json, "json", false, "print JSON (snake_case keys, durations in ms, errors as {\"error\": ...})")
	err := cmd.run(ctx, c, rest)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(cmd)
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, service.ErrInvalidInput) {
		return fail(2, name+": "+c.describe(err)+" (see --help)")
	}
	return fail(1, name+": "+c.describe(err))
}

// printHelp prints a command's help and flags on stdout.
func (c *cli) printHelp(cmd *command) {
	fmt.Fprintf(c.stdout, "Usage: roster %s [flags]%s\n\n%s\n\nFlags:\n", c.name, cmd.args, cmd.help)
	c.flags.SetOutput(c.stdout)
	c.flags.PrintDefaults()
	c.flags.SetOutput(io.Discard)
}

// envStringVar defines a string flag whose default is the environment
// variable env, else fallback. The help never shows a secret: a connection
// string's password is shown as xxxxx, and a secret flag's default (a token)
// not at all, only whether env is set. A secret flag's values, from env and
// from the command line, are hidden in every error printed.
func (c *cli) envStringVar(p *string, name, env, fallback, usage string, secret bool) {
	def := os.Getenv(env)
	set := def != ""
	if !set {
		def = fallback
	}
	usage += " ($" + env + ")"
	if secret && set {
		usage = strings.TrimSuffix(usage, ")") + ", which is set; its value is never shown)"
	}
	c.flags.StringVar(p, name, def, usage)
	f := c.flags.Lookup(name)
	f.DefValue = connstr.Redact(def)
	if secret {
		f.DefValue = ""
		c.secrets = append(c.secrets, def)
		c.secretFlags = append(c.secretFlags, p)
	}
}

// scrub hides every secret of the command line and the environment in msg:
// the passwords of connection strings (--db, $ROSTER_DB, and any argument
// that is one) and the values of secret flags.
func (c *cli) scrub(msg string) string {
	var literals []string
	for _, v := range c.secrets {
		if v != "" {
			literals = append(literals, v)
		}
	}
	for _, p := range c.secretFlags { // the values given on the command line
		if *p != "" {
			literals = append(literals, *p)
		}
	}
	sort.Slice(literals, func(i, j int) bool { return len(literals[i]) > len(literals[j]) })
	for _, v := range literals {
		msg = strings.ReplaceAll(msg, v, connstr.Mask)
	}
	return connstr.Scrub(msg, append([]string{c.db, os.Getenv("ROSTER_DB")}, c.argv...)...)
}

func contains(args []string, s string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == s {
			return true
		}
	}
	return false
}

// printError writes an error as a line of text, or as {"error": "..."}.
func printError(w io.Writer, asJSON bool, msg string) {
	if asJSON {
		b, _ := json.Marshal(map[string]string{"error": msg})
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintln(w, msg)
}

// fieldFlags names the flag (or argument) behind each argument field that
// roster's errors name.
var fieldFlags = map[string]string{
	"Limit": "--limit", "limit": "--limit", "After": "--after", "AfterSeq": "--after-seq",
	"Namespace": "--namespace", "InstanceID": "--instance", "State": "--state", "OwnerActor": "--owner",
	"VisibleIn": "--visible-in", "Lane": "--lane", "Reason": "--reason", "host": "--host",
	"ID": "ID", "version": "VERSION", "steps": "--steps", "path": "--db", "max": "--max",
	// schedules put
	"Every": "--every", "Cron": "--cron", "Name": "NAME", "Template.Lane": "--lane", "Template.Payload": "--payload",
	"Template.Priority": "--priority", "Template.RequiredCapabilities": "--capability",
	"Template.MaxAttempts": "--max-attempts", "Template.RetryBackoff": "--retry-backoff",
	"RunAt": "--run-at", "UniqueKey": "--unique-key", "Group": "--group",
}

var invalidField = regexp.MustCompile(`^roster: invalid input: ([A-Za-z.]+(?:\[\d+\])?): `)

// describe is cli.describe without a command's own argument names.
func describe(err error) string { return (&cli{}).describe(err) }

// describe turns an error into one clear line: the flag or argument at
// fault instead of the Go field (the command's own names first, then
// fieldFlags), and no repeated "roster:" prefixes.
func (c *cli) describe(err error) string {
	msg := err.Error()
	if m := invalidField.FindStringSubmatch(msg); m != nil {
		field := m[1]
		// An element of a list ("Template.RequiredCapabilities[0]") is the
		// list's flag, repeated: the flag is named.
		base, _, _ := strings.Cut(field, "[")
		if f, ok := c.fields[base]; ok {
			field = f
		} else if f, ok := fieldFlags[base]; ok {
			field = f
		}
		msg = "invalid " + field + ": " + msg[len(m[0]):]
	}
	for strings.HasPrefix(msg, "roster: ") {
		msg = strings.TrimPrefix(msg, "roster: ")
	}
	return msg
}

// cli is one command's invocation.
type cli struct {
	name           string
	flags          *flag.FlagSet
	db             string
	json           bool
	args           []string // positional arguments
	stdout, stderr io.Writer
	stdin          io.Reader // --payload -: nil is os.Stdin (tests give their own)
	argv           []string  // the whole command line
	secrets        []string  // values no error may show
	secretFlags    []*string // flags whose values no error may show
	// fields names the positional arguments behind the fields of this
	// command's errors, where they differ from fieldFlags (a NAMESPACE
	// argument rather than a --namespace flag).
	fields map[string]string
	// keyedNamespace: the command's first argument is NAMESPACE (a key, as
	// in "schedules pause NAMESPACE NAME"); a --namespace flag is accepted
	// in its place with a note. Commands that filter by namespace take
	// --namespace, and accept a lone argument in its place with a note.
	keyedNamespace bool
}

var negativeNumber = regexp.MustCompile(`^-[0-9]+$`)

// parse parses the command's flags, which may stand before or after its
// positional arguments (a negative number, such as "-1", is a positional
// argument unless it is a flag's value), and checks the positional count.
func (c *cli) parse(args []string, positional int) error {
	var keyedNS *string
	if c.keyedNamespace && c.flags.Lookup("namespace") == nil {
		keyedNS = c.flags.String("namespace", "", "the NAMESPACE argument, given as a flag (the usual form is NAMESPACE first)")
	}
	var flagArgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			c.args = append(c.args, args[i+1:]...)
			i = len(args)
		case negativeNumber.MatchString(a):
			c.args = append(c.args, a)
		case strings.HasPrefix(a, "-"):
			flagArgs = append(flagArgs, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := c.flags.Lookup(name); f != nil && !isBool(f) && i+1 < len(args) {
				i++
				flagArgs = append(flagArgs, args[i])
			}
		default:
			c.args = append(c.args, a)
		}
	}
	if err := c.flags.Parse(flagArgs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%v", strings.Replace(err.Error(), "provided but not defined: -", "provided but not defined: --", 1))
	}
	if err := c.namespaceEitherWay(keyedNS, positional); err != nil {
		return err
	}
	switch {
	case positional == anyCount:
	case positional == oneOrMore && len(c.args) == 0:
		return usagef("want at least one argument")
	case positional >= 0 && len(c.args) != positional:
		return usagef("want %d argument(s), got %d", positional, len(c.args))
	}
	return nil
}

// namespaceEitherWay accepts the namespace in the form the command does not
// use, with a note on stderr: --namespace NS for a command whose first
// argument is NAMESPACE (keyed: the flag it was given for that), and a lone
// argument for a command that filters by --namespace and takes none.
func (c *cli) namespaceEitherWay(keyed *string, positional int) error {
	switch {
	case keyed != nil && *keyed != "":
		switch {
		case len(c.args) == positional-1:
			c.args = append([]string{*keyed}, c.args...)
			fmt.Fprintf(c.stderr, "roster: note: %s takes NAMESPACE as its first argument (roster %s %s ...); --namespace %s read as that\n",
				c.name, c.name, *keyed, *keyed)
		case len(c.args) == positional && c.args[0] == *keyed:
		default:
			return usagef("--namespace %q and the arguments %q disagree: %s takes NAMESPACE as its first argument", *keyed, c.args, c.name)
		}
	case keyed == nil && positional == 0 && len(c.args) == 1:
		f := c.flags.Lookup("namespace")
		if f == nil || f.Value.String() != "" {
			return nil // not a filter by namespace, or given twice: the count check refuses it
		}
		if err := f.Value.Set(c.args[0]); err != nil {
			return usagef("invalid --namespace: %v", err)
		}
		fmt.Fprintf(c.stderr, "roster: note: %s takes the namespace as --namespace (roster %s --namespace %s); the argument %s read as that\n",
			c.name, c.name, c.args[0], c.args[0])
		c.args = nil
	}
	return nil
}

// Positional argument counts that are not exact.
const (
	oneOrMore = -1
	anyCount  = -2
)

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// isURL reports whether a --db value names a PostgreSQL database.
func isURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// displayDB is a --db value fit to print: a password is never shown, in any
// form of connection string.
func displayDB(db string) string { return connstr.Redact(db) }

// shellQuote quotes s for a POSIX shell: as is when it holds only characters
// no shell treats specially, else in single quotes, each embedded quote
// written as a quote that closes, an escaped quote, and one that reopens.
func shellQuote(s string) string {
	safe := func(r rune) bool {
		return r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-+=.,/:@%", r))
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !safe(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// migrateUpHint ends a message with the command that creates or migrates the
// database, ready to paste into a POSIX shell: "<what> with: roster migrate
// up --db '...'". A password is shown as xxxxx, and the hint says so.
func (c *cli) migrateUpHint(what string) string {
	shown := displayDB(c.db)
	if shown != c.db {
		what += " (the password shown as " + connstr.Mask + ")"
	}
	return what + " with: roster migrate up --db " + shellQuote(shown)
}

// missing is the error for a database that does not exist.
func (c *cli) missing() error {
	return fmt.Errorf("no database at %s; pass --db, or %s", displayDB(c.db), c.migrateUpHint("create one"))
}

// openRead opens the database read-only: it is never migrated or created.
func (c *cli) openRead(ctx context.Context) (*service.Store, error) {
	s, err := service.Open(ctx, c.db, service.WithReadOnly())
	return s, c.openError(err)
}

// openWrite opens an existing, current database for writing: it is never
// created or migrated by a command other than migrate up.
func (c *cli) openWrite(ctx context.Context) (*service.Store, error) {
	if !isURL(c.db) {
		if _, err := os.Stat(c.db); err != nil {
			return nil, c.missing()
		}
	}
	s, err := service.Open(ctx, c.db, service.WithoutMigrate())
	return s, c.openError(err)
}

func (c *cli) openError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, service.ErrNotFound):
		return c.missing()
	case errors.Is(err, service.ErrSchemaOutdated):
		return fmt.Errorf("%w; %s", err, c.migrateUpHint("migrate it"))
	}
	return err
}

// withRead parses the flags, opens the database read-only and runs fn.
func (c *cli) withRead(ctx context.Context, args []string, positional int, fn func(s *service.Store) error) error {
	return c.with(ctx, args, positional, c.openRead, fn)
}

// withWrite parses the flags, opens the database for writing and runs fn.
func (c *cli) withWrite(ctx context.Context, args []string, positional int, fn func(s *service.Store) error) error {
	return c.with(ctx, args, positional, c.openWrite, fn)
}

func (c *cli) with(ctx context.Context, args []string, positional int, open func(context.Context) (*service.Store, error), fn func(s *service.Store) error) error {
	if err := c.parse(args, positional); err != nil {
		return err
	}
	s, err := open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(s)
}

// print writes v as indented JSON, or the rows as an aligned table.
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

// command is a command or a subcommand.
type command struct {
	args    string
	help    string
	run     func(ctx context.Context, c *cli, args []string) error
	subs    map[string]*command
	subList string
}

// printSubcommands is a command's help: each subcommand with its arguments
// and what it does.
func printSubcommands(w io.Writer, name string, cmd *command) {
	fmt.Fprintf(w, "Usage: roster %s %s [flags]\n\nSubcommands:\n", name, cmd.subList)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, sub := range strings.Split(cmd.subList, "|") {
		fmt.Fprintf(tw, "  %s%s\t%s\n", sub, cmd.subs[sub].args, cmd.subs[sub].help)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nRun \"roster %s SUBCOMMAND --help\" for its flags.\n", name)
}

func subList(subs map[string]*command) string {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

var commands = map[string]*command{}

func init() {
	for name, cmd := range map[string]*command{
		"migrate": {subs: map[string]*command{
			"up":      {help: "Apply every pending migration, creating the database if absent.", run: migrateUp},
			"down":    {help: "Roll back migrations (--steps, 0 = all), in one transaction.", run: migrateDown},
			"version": {help: "Print the schema version and the latest this build knows (reads only); with no migration applied the version is none (JSON: null).", run: migrateVersion},
			"force":   {args: " VERSION", help: "Record VERSION (-1 = none, up to the latest this build knows) as the clean schema version without running migrations: the repair after a migration failed outside roster.", run: migrateForce},
		}},
		"workers": {subs: map[string]*command{
			"list":  {help: "List workers in (namespace, instance) order (reads only).", run: workersList},
			"sweep": {help: "Delete every worker whose TTL has lapsed and end its leases ('roster sweep' also reclaims and prunes).", run: workersSweep},
		}},
		"events": {subs: map[string]*command{
			"list":  {help: "Read the worker audit log in Seq order; --follow tails it (reads only).", run: eventsList},
			"prune": {help: "Delete the audit events older than --older-than.", run: eventsPrune},
		}},
		"executions": {subs: map[string]*command{
			"list":   {help: "List executions in creation order, filtered by namespace, lane and state (reads only).", run: executionsList},
			"get":    {args: " ID", help: "Show one execution (reads only).", run: executionsGet},
			"cancel": {args: " ID", help: "Cancel a waiting or running execution (a running one's lease ends at once).", run: executionsCancel},
			"prune":  {help: "Delete the executions that finished before --older-than ago, with their attempts.", run: executionsPrune},
		}},
		"leases": {subs: map[string]*command{
			"expired": {help: "List running leases past their expiry (reads only).", run: leasesExpired},
			"reclaim": {help: "Reclaim expired leases: their executions wait again (with backoff) or fail.", run: leasesReclaim},
		}},
		"agents": {subs: map[string]*command{
			"list":           {help: "List agents in id order, optionally of one state, owner, namespace, host or holder (reads only).", run: agentsList},
			"get":            {args: " ID", help: "Show one agent (reads only).", run: agentsGet},
			"terminate-live": {help: "The boot scan: end the live agents of --host with reason host_restart; without --host every live agent, which needs --all-hosts on a database many hosts share (PostgreSQL, or one where a live agent names a host).", run: agentsTerminateLive},
		}},
		"sweep": {help: "One full maintenance run: sweep lapsed workers, reclaim expired leases, prune old events and executions, create the due runs of schedules.", run: sweep},
		"stats": {help: "The fleet at a glance: workers, lanes, expired leases, agents (reads only).", run: stats},
		"check": {help: "Look for damage: the engine's integrity check and roster's consistency rules (reads only). Exit 1 when a problem is found.", run: check},
		"serve": {help: "Serve a read-only status page of the fleet, its JSON, /metrics and /healthz.", run: serve},
		"demo":  {help: "Run a small fleet end to end on a fresh temporary database (a --db must be new or empty).", run: demo},
	} {
		if cmd.subs != nil {
			cmd.subList = subList(cmd.subs)
		}
		commands[name] = cmd
	}
	registerFleet()
	registerLanes()
	registerQueue()
}
