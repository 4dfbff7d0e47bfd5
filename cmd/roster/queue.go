package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rosterdb/roster/service"
)

// registerQueue adds the commands of the queue's history and enqueue:
// executions create and executions attempts.
func registerQueue() {
	ex := commands["executions"]
	ex.subs["create"] = &command{args: " NAMESPACE LANE", help: "Create an execution of LANE in NAMESPACE: its payload from --payload (text, @FILE, or - for stdin), with --metadata KEY=VALUE entries (repeat), --run-at, --unique-key, --group, --priority, --max-attempts and --capability.", run: executionsCreate}
	ex.subs["attempts"] = &command{args: " ID", help: "List the attempts of an execution, oldest first: holder, start, end, outcome and error (reads only).", run: executionsAttempts}
	ex.subList = subList(ex.subs)
}

// createArgFields names the positional arguments of executions create.
var createArgFields = map[string]string{"Namespace": "NAMESPACE", "Lane": "LANE", "UniqueKey": "--unique-key",
	"Payload": "--payload", "Priority": "--priority", "MaxAttempts": "--max-attempts",
	"RequiredCapabilities": "--capability", "Metadata": "--metadata", "Group": "--group"}

// parseMetadata reads --metadata KEY=VALUE entries (the value may hold
// "="; nil when none).
func parseMetadata(entries []string) (map[string]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(entries))
	for _, v := range entries {
		k, val, ok := strings.Cut(v, "=")
		switch {
		case !ok:
			return nil, usagef("invalid --metadata: %q is not KEY=VALUE", v)
		case k == "":
			return nil, usagef("invalid --metadata: %q has an empty key", v)
		}
		if _, dup := m[k]; dup {
			return nil, usagef("invalid --metadata: key %q given twice", k)
		}
		m[k] = val
	}
	return m, nil
}

// readPayload reads --payload: @FILE is the file's bytes, - is stdin, else
// the text itself.
func (c *cli) readPayload(v string) ([]byte, error) {
	switch {
	case v == "-":
		in := c.stdin
		if in == nil {
			in = os.Stdin
		}
		b, err := io.ReadAll(in)
		if err != nil {
			return nil, usagef("invalid --payload: reading stdin: %v", err)
		}
		return b, nil
	case strings.HasPrefix(v, "@"):
		b, err := os.ReadFile(v[1:])
		if err != nil {
			return nil, usagef("invalid --payload: %v", err)
		}
		return b, nil
	}
	return []byte(v), nil
}

func executionsCreate(ctx context.Context, c *cli, args []string) error {
	payload := c.flags.String("payload", "", "the payload: text, @FILE for a file's bytes, or - for stdin")
	runAt := c.flags.String("run-at", "", "not claimable before this time (RFC 3339; default: at once)")
	uniqueKey := c.flags.String("unique-key", "", "an idempotent create: while an execution holding this key is live, return it instead")
	group := c.flags.String("group", "", "the execution's group in its lane: groups take turns, and a lane's per-group cap counts it")
	priority := c.flags.Int("priority", 0, "higher is claimed first")
	maxAttempts := c.flags.Int("max-attempts", 0, "attempts allowed (0: the Store's default)")
	var metadata stringList
	c.flags.Var(&metadata, "metadata", "a KEY=VALUE entry of the execution's metadata (repeat for several)")
	var caps stringList
	c.flags.Var(&caps, "capability", "a capability the execution requires (repeat for several)")
	c.fields = createArgFields
	c.keyedNamespace = true
	return c.withWrite(ctx, args, 2, func(s *service.Store) error {
		md, err := parseMetadata(metadata)
		if err != nil {
			return err
		}
		body, err := c.readPayload(*payload)
		if err != nil {
			return err
		}
		var at time.Time
		if *runAt != "" {
			if at, err = time.Parse(time.RFC3339Nano, *runAt); err != nil {
				return usagef("invalid --run-at: %q is not an RFC 3339 time", *runAt)
			}
		}
		a := service.CreateExecutionArgs{Namespace: c.args[0], Lane: c.args[1], Payload: body, RunAt: at,
			UniqueKey: *uniqueKey, Group: *group, Priority: *priority, MaxAttempts: *maxAttempts, RequiredCapabilities: caps, Metadata: md}
		id, err := s.CreateExecution(ctx, a)
		if err != nil {
			return err
		}
		e, err := s.GetExecution(ctx, id)
		if err != nil {
			return err
		}
		return c.print(executionView(e), executionHeader, [][]string{executionRow(e)}, "")
	})
}

// attemptJSON is one attempt in --json.
type attemptJSON struct {
	Index      int        `json:"index"`
	Epoch      int64      `json:"epoch"`
	InstanceID string     `json:"instance_id"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at"`
	Outcome    string     `json:"outcome"`
	Error      string     `json:"error"`
}

func attemptViews(as []service.Attempt) []attemptJSON {
	out := make([]attemptJSON, len(as))
	for i, a := range as {
		out[i] = attemptJSON{Index: a.Index, Epoch: a.Epoch, InstanceID: a.InstanceID, StartedAt: a.StartedAt,
			EndedAt: optional(a.EndedAt), Outcome: string(a.Outcome), Error: a.Error}
	}
	return out
}

var attemptHeader = []string{"#", "EPOCH", "HOLDER", "STARTED", "ENDED", "OUTCOME", "ERROR"}

func attemptRow(a service.Attempt) []string {
	return []string{fmt.Sprint(a.Index), fmt.Sprint(a.Epoch), a.InstanceID, ts(a.StartedAt), ts(a.EndedAt), string(a.Outcome), oneLine(a.Error)}
}

// oneLine shows free text on one table line.
func oneLine(s string) string {
	if s == "" {
		return "-"
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func executionsAttempts(ctx context.Context, c *cli, args []string) error {
	return c.withRead(ctx, args, 1, func(s *service.Store) error {
		id, err := c.executionID()
		if err != nil {
			return err
		}
		as, err := s.ListAttempts(ctx, id)
		if err != nil {
			return err
		}
		rows := make([][]string, len(as))
		for i, a := range as {
			rows[i] = attemptRow(a)
		}
		return c.print(pageJSON[attemptJSON]{Items: attemptViews(as)}, attemptHeader, rows, "")
	})
}

// executionDetailJSON is executions get's --json: the execution and its
// attempts.
type executionDetailJSON struct {
	executionJSON
	AttemptHistory []attemptJSON `json:"attempt_history"`
}

// metadataCell shows metadata on one line, sorted by key.
func metadataCell(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	entries := make([]string, 0, len(m))
	for k, v := range m {
		entries = append(entries, k+"="+v)
	}
	slices.Sort(entries)
	return strings.Join(entries, ",")
}
