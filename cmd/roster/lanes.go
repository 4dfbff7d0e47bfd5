package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rosterdb/roster/service"
)

// registerLanes adds the flow-control commands: lanes list, limit, pause,
// resume and delete.
func registerLanes() {
	commands["lanes"] = &command{subs: map[string]*command{
		"list":   {help: "List the lanes that have limits, by (namespace, lane): caps, rate and whether paused (reads only).", run: lanesList},
		"limit":  {args: " NAMESPACE LANE", help: "Set a lane's limits: --max-running N, --max-running-per-group N, --rate N/PERIOD (e.g. 100/1m); 0 removes one; flags not given keep their value, and a paused lane stays paused.", run: lanesLimit},
		"pause":  {args: " NAMESPACE LANE", help: "Pause a lane fleet-wide: nobody claims from it; running executions go on.", run: lanesPause},
		"resume": {args: " NAMESPACE LANE", help: "Resume a paused lane: idle workers wake at once.", run: lanesResume},
		"delete": {args: " NAMESPACE LANE", help: "Delete a lane's limits: it is claimed without limits (and resumed).", run: lanesDelete},
	}}
	commands["lanes"].subList = subList(commands["lanes"].subs)
}

// laneLimitsJSON is a lane's limits for --json (durations in milliseconds).
type laneLimitsJSON struct {
	Namespace          string `json:"namespace"`
	Lane               string `json:"lane"`
	MaxRunning         int    `json:"max_running"`
	MaxRunningPerGroup int    `json:"max_running_per_group"`
	Rate               int    `json:"rate"`
	RatePeriodMs       int64  `json:"rate_period_ms"`
	Paused             bool   `json:"paused"`
}

func laneLimitsView(l service.LaneLimits) laneLimitsJSON {
	return laneLimitsJSON{Namespace: l.Namespace, Lane: l.Lane, MaxRunning: l.MaxRunning, MaxRunningPerGroup: l.MaxRunningPerGroup,
		Rate: l.Rate, RatePeriodMs: l.RatePeriod.Milliseconds(), Paused: l.Paused}
}

func laneLimitsRow(l service.LaneLimits) []string {
	limit := func(n int) string {
		if n == 0 {
			return "-"
		}
		return strconv.Itoa(n)
	}
	rate, state := "-", "active"
	if l.Rate > 0 {
		rate = fmt.Sprintf("%d/%v", l.Rate, l.RatePeriod)
	}
	if l.Paused {
		state = "paused"
	}
	return []string{l.Namespace, l.Lane, limit(l.MaxRunning), limit(l.MaxRunningPerGroup), rate, state}
}

var laneLimitsHeader = []string{"NAMESPACE", "LANE", "MAX RUNNING", "PER GROUP", "RATE", "STATE"}

func lanesList(ctx context.Context, c *cli, args []string) error {
	ns := c.flags.String("namespace", "", "only this namespace (default: all)")
	return c.withRead(ctx, args, 0, func(s *service.Store) error {
		ls, err := s.ListLaneLimits(ctx, *ns)
		if err != nil {
			return err
		}
		out := pageJSON[laneLimitsJSON]{Items: []laneLimitsJSON{}}
		var rows [][]string
		for _, l := range ls {
			out.Items = append(out.Items, laneLimitsView(l))
			rows = append(rows, laneLimitsRow(l))
		}
		return c.print(out, laneLimitsHeader, rows, "")
	})
}

// rateFlag parses N/PERIOD, e.g. 100/1m; 0 is no rate.
type rateFlag struct {
	n      int
	period time.Duration
}

func (r *rateFlag) String() string {
	if r.n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d/%v", r.n, r.period)
}

func (r *rateFlag) Set(v string) error {
	if v == "0" {
		*r = rateFlag{}
		return nil
	}
	n, p, ok := strings.Cut(v, "/")
	if !ok {
		return fmt.Errorf("want N/PERIOD (e.g. 100/1m) or 0, got %q", v)
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 0 {
		return fmt.Errorf("the count of %q is not a whole number", v)
	}
	period, err := time.ParseDuration(p)
	if err != nil {
		return fmt.Errorf("the period of %q: %v", v, err)
	}
	*r = rateFlag{n: count, period: period}
	return nil
}

// laneArgFields names the positional arguments of the lanes commands.
var laneArgFields = map[string]string{
	"Namespace": "NAMESPACE", "namespace": "NAMESPACE", "Lane": "LANE", "lane": "LANE",
	"MaxRunning": "--max-running", "MaxRunningPerGroup": "--max-running-per-group", "Rate": "--rate", "RatePeriod": "--rate",
}

// withLane parses a lanes command of NAMESPACE LANE, checks both (before
// anything is opened), opens the Store for writing and calls fn with the
// lane's limits as stored (zero but for the key when it has none).
func (c *cli) withLane(ctx context.Context, args []string, fn func(s *service.Store, l service.LaneLimits, found bool) error) error {
	c.keyedNamespace = true
	if err := c.parse(args, 2); err != nil {
		return err
	}
	c.fields = laneArgFields
	ns, lane := c.args[0], c.args[1]
	if ns == "" {
		return usagef("invalid NAMESPACE: must not be empty (a lane's limits live in one namespace)")
	}
	if err := service.CheckIdentifier("Namespace", ns); err != nil {
		return err
	}
	if err := service.CheckIdentifier("Lane", lane); err != nil {
		return err
	}
	s, err := c.openWrite(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	ls, err := s.ListLaneLimits(ctx, ns)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if l.Lane == lane {
			return fn(s, l, true)
		}
	}
	return fn(s, service.LaneLimits{Namespace: ns, Lane: lane}, false)
}

func (c *cli) putLane(ctx context.Context, s *service.Store, l service.LaneLimits) error {
	if err := s.PutLaneLimits(ctx, l); err != nil {
		return err
	}
	return c.print(laneLimitsView(l), laneLimitsHeader, [][]string{laneLimitsRow(l)}, "")
}

func lanesLimit(ctx context.Context, c *cli, args []string) error {
	maxRunning := c.flags.Int("max-running", 0, "at most this many executions of the lane running at once, fleet-wide (0: no cap)")
	perGroup := c.flags.Int("max-running-per-group", 0, "at most this many running at once per group of the lane (0: no cap)")
	var rate rateFlag
	c.flags.Var(&rate, "rate", "at most N claims per PERIOD window, aligned to the Unix epoch (N/PERIOD, e.g. 100/1m; 0: none)")
	return c.withLane(ctx, args, func(s *service.Store, l service.LaneLimits, _ bool) error {
		set := map[string]bool{}
		c.flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["max-running"] && !set["max-running-per-group"] && !set["rate"] {
			return usagef("lanes limit: give at least one of --max-running, --max-running-per-group and --rate")
		}
		if set["max-running"] {
			l.MaxRunning = *maxRunning
		}
		if set["max-running-per-group"] {
			l.MaxRunningPerGroup = *perGroup
		}
		if set["rate"] {
			l.Rate, l.RatePeriod = rate.n, rate.period
		}
		return c.putLane(ctx, s, l)
	})
}

func lanesPause(ctx context.Context, c *cli, args []string) error {
	return c.withLane(ctx, args, func(s *service.Store, l service.LaneLimits, _ bool) error {
		l.Paused = true
		return c.putLane(ctx, s, l)
	})
}

func lanesResume(ctx context.Context, c *cli, args []string) error {
	return c.withLane(ctx, args, func(s *service.Store, l service.LaneLimits, found bool) error {
		if !found {
			return fmt.Errorf("%w: lane %q of namespace %q has no limits (it is not paused)", service.ErrNotFound, l.Lane, l.Namespace)
		}
		l.Paused = false
		return c.putLane(ctx, s, l)
	})
}

func lanesDelete(ctx context.Context, c *cli, args []string) error {
	return c.withLane(ctx, args, func(s *service.Store, l service.LaneLimits, _ bool) error {
		if err := s.DeleteLaneLimits(ctx, l.Namespace, l.Lane); err != nil {
			return err
		}
		return c.print(map[string]string{"namespace": l.Namespace, "deleted": l.Lane}, []string{"NAMESPACE", "DELETED"}, [][]string{{l.Namespace, l.Lane}}, "")
	})
}
