package service

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// Stats is one consistent snapshot of the fleet.
type Stats struct {
	At         time.Time
	Namespaces []NamespaceStats   // ordered by name
	Agents     map[AgentState]int // every state present, zero included
	// Leader is the RunSweeper instance that holds the maintenance
	// leadership at At, until LeaderUntil ("" and zero: none).
	Leader      string
	LeaderUntil time.Time
}

// NamespaceStats describes one namespace.
type NamespaceStats struct {
	Namespace                   string
	WorkersAlive, WorkersLapsed int         // lapsed: not alive, not yet swept
	ExpiredLeases               int         // running leases with ExpiresAt <= At
	Lanes                       []LaneStats // ordered by lane; lanes with nothing waiting or running are left out
}

// LaneStats describes the executions of one lane.
type LaneStats struct {
	Lane                      string
	Ready, Scheduled, Running int       // waiting with RunAt <= At; waiting with RunAt > At; running
	OldestReadyRunAt          time.Time // zero when Ready is 0
	// Limits are the lane's flow-control limits (nil: none): how close
	// Running is to MaxRunning, and whether the lane is paused.
	Limits *LaneLimits
	// WorkersAlive counts the namespace's alive workers that claim from
	// the lane.
	WorkersAlive int
}

// Unserved reports whether the lane has ready work and no alive worker
// claims from it: nothing will run it until one registers.
func (l LaneStats) Unserved() bool { return l.Ready > 0 && l.WorkersAlive == 0 }

// Stats reads one consistent snapshot of the fleet at a time (zero: the
// Store's clock). Its cost grows with the live rows (waiting and running
// executions, registered workers and their lanes, running leases), never with finished
// history: finished executions are out of its indexes, and agents are counted
// per state by the schema itself.
func (s *Store) Stats(ctx context.Context, at time.Time) (Stats, error) {
	if err := s.notClosed(); err != nil {
		return Stats{}, err
	}
	if err := validTime("at", at); err != nil {
		return Stats{}, err
	}
	at = s.now(at)
	var rows engine.StatsRows
	var limits []engine.LaneLimits
	var holder string
	var until int64
	err := s.snapshot(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		if rows, err = q.Stats(ctx, at.UnixMilli()); err != nil {
			return err
		}
		if limits, err = q.LaneLimitsList(ctx, ""); err != nil {
			return err
		}
		holder, _, until, err = q.LeaderGet(ctx, maintenanceRole)
		if errors.Is(err, engine.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return Stats{}, err
	}
	st := Stats{At: at, Agents: map[AgentState]int{}}
	if until > at.UnixMilli() {
		st.Leader, st.LeaderUntil = holder, msTime(until)
	}
	for _, state := range []AgentState{AgentSpawned, AgentRunning, AgentSuspended, AgentTerminal} {
		st.Agents[state] = int(rows.Agents[string(state)])
	}
	var names []string
	for _, w := range rows.Workers {
		names = append(names, w.Namespace)
	}
	for _, e := range rows.ExpiredLeases {
		names = append(names, e.Namespace)
	}
	for _, l := range rows.Lanes {
		names = append(names, l.Namespace)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	st.Namespaces = make([]NamespaceStats, len(names))
	byName := make(map[string]*NamespaceStats, len(names))
	for i, name := range names {
		st.Namespaces[i].Namespace = name
		byName[name] = &st.Namespaces[i]
	}
	for _, w := range rows.Workers {
		n := byName[w.Namespace]
		n.WorkersAlive, n.WorkersLapsed = int(w.Alive), int(w.Lapsed)
	}
	for _, e := range rows.ExpiredLeases {
		byName[e.Namespace].ExpiredLeases = int(e.N)
	}
	limited := make(map[[2]string]LaneLimits, len(limits))
	for _, l := range limits {
		limited[[2]string{l.Namespace, l.Lane}] = laneLimitsFromRow(l)
	}
	serving := make(map[[2]string]int, len(rows.LaneWorkers))
	for _, w := range rows.LaneWorkers {
		serving[[2]string{w.Namespace, w.Lane}] = int(w.Alive)
	}
	for _, l := range rows.Lanes { // ordered by (namespace, lane)
		ls := LaneStats{Lane: l.Lane, Ready: int(l.Ready), Scheduled: int(l.Scheduled), Running: int(l.Running),
			WorkersAlive: serving[[2]string{l.Namespace, l.Lane}]}
		if lim, ok := limited[[2]string{l.Namespace, l.Lane}]; ok {
			ls.Limits = &lim
		}
		if l.Ready > 0 {
			ls.OldestReadyRunAt = msTime(l.OldestReadyMs)
		}
		n := byName[l.Namespace]
		n.Lanes = append(n.Lanes, ls)
	}
	return st, nil
}
