package engine

import (
	"bytes"
	"cmp"
	"context"
	"math"

	"github.com/google/uuid"
)

// Flow control: the claim of lanes that have limits or groups. A worker
// whose lanes have neither is claimed by each engine's own claim, as
// before; one of whose lanes has either is claimed by FlowClaim on SQLite
// (in one transaction, through FlowQueries), and on PostgreSQL by the
// server-side function roster_flow_claim (schema/postgres, migration 18),
// which takes the same steps in one call:
//  1. the worker (alive, its lanes and capabilities);
//  2. the claim lock of each of its lanes that has limits or groups, in lane
//     order (PostgreSQL: an advisory lock; SQLite's single writer holds
//     them all), so that what the next steps read holds until the commit:
//     no other claim of those lanes runs meanwhile, and a settle only lowers
//     the counts;
//  3. each lane's room: what its cap (MaxRunning less what runs) and its
//     rate (Rate less the claims of the current window) allow, none when it
//     is paused;
//  4. a lane without groups gives its best ready executions, as many as its
//     room and the cap of its one group allow; a lane with groups gives
//     them in turns: at each priority, from the highest down, the groups in
//     key order (byte by byte) after the group it served last at that
//     priority to workers of the same capabilities, then from the first
//     group up to that one, each group's first execution before any group's
//     second, a group at its cap (MaxRunningPerGroup) passed over. Each step
//     of a turn is one probe of the ready index (the first entry after a
//     group at a priority is the next group's best execution), so a lane's
//     groups cost nothing until they have ready work;
//  5. across lanes, the best of the lanes' next executions (the claim's
//     order), until the claim has what it asked for;
//  6. the start, then each grouped lane's last group served at each priority
//     and each rated lane's count in its window.
// The two are kept alike by the conformance suite, which both engines run.

// LaneLimits are a lane's limits as stored (0: none).
type LaneLimits struct {
	Namespace, Lane                             string
	MaxRunning, MaxPerGroup, Rate, RatePeriodMs int64
	Paused                                      bool
}

// LaneKey names a lane of a namespace.
type LaneKey struct{ Namespace, Lane string }

// GroupedLanes lists the lanes the executions with a group are created in,
// each once: from then on each of them takes turns between its groups
// (executions without a group among them, in the group ""). None when no
// execution has a group.
func GroupedLanes(es []Execution) []LaneKey {
	var keys []LaneKey
	seen := make(map[LaneKey]bool)
	for _, e := range es {
		k := LaneKey{e.Namespace, e.Lane}
		if e.Group != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// FlowLane is a lane's limits, counts and turn for a flow claim.
type FlowLane struct {
	Lane                       string
	Limited, Grouped, Paused   bool
	MaxRunning, MaxPerGroup    int64
	Rate, RatePeriodMs         int64
	WindowStartMs, WindowCount int64
	// Running is what runs in the lane, counted up to the larger of its caps
	// when it has one.
	Running int64
}

// Flow tells whether the lane's claims go through FlowClaim.
func (l FlowLane) Flow() bool { return l.Limited || l.Grouped }

// FlowCandidate is a ready execution a flow claim may take.
type FlowCandidate struct {
	ID             uuid.UUID
	Lane, Group    string
	Priority       int64
	RunAtMs, Bytes int64
}

// FlowWorker is a worker as a flow claim needs it: its lanes and its
// capabilities.
type FlowWorker struct {
	Lanes, Capabilities []string
	// Due says scheduled executions of the namespace are due: the claim
	// makes them ready first (FlowPromote), so that they compete.
	Due bool
}

// FlowStep says where steps of a lane's turns start: at a priority, from
// the first group after After in key order (from the first group when
// FromStart) with a ready execution the capabilities allow.
type FlowStep struct {
	Namespace, Lane string
	Capabilities    []string
	Priority        int64
	After           string
	FromStart       bool
	// PerGroup is the lane's cap per group: each step counts what runs in
	// the group it finds up to it (0: counts nothing).
	PerGroup int64
}

// FlowTurn is a step of a lane's turns: a group's best ready execution that
// the capabilities allow, and what runs in the group.
type FlowTurn struct {
	FlowCandidate
	Running int64
}

// FlowQueries are the statements of a flow claim (FlowClaim), run in one
// transaction.
type FlowQueries interface {
	// FlowWorker reads an alive worker's lanes and capabilities (ErrNoRows:
	// not alive, or being deleted).
	FlowWorker(ctx context.Context, k WorkerKey, nowMs int64) (FlowWorker, error)
	// FlowPromote makes due scheduled executions of the namespace ready.
	FlowPromote(ctx context.Context, namespace string, nowMs int64) error
	// FlowLanes reads each lane's limits, counts and turn, in lane order.
	FlowLanes(ctx context.Context, namespace string, lanes []string) ([]FlowLane, error)
	// FlowPick reads up to n of the best ready executions of a lane without
	// groups that the capabilities allow, best first.
	FlowPick(ctx context.Context, namespace, lane string, capabilities []string, n int64) ([]FlowCandidate, error)
	// FlowLevel is the highest priority at or below below of a lane's ready
	// executions (found: there is one), with the group the lane served last
	// at that priority to workers of the capabilities ("" before): its turns
	// go on after it.
	FlowLevel(ctx context.Context, namespace, lane string, capabilities []string, below int64) (priority int64, lastGroup string, found bool, err error)
	// FlowWalk takes up to steps steps of a lane's turns from s, one group
	// each, in key order (fewer: there are no more groups).
	FlowWalk(ctx context.Context, s FlowStep, steps int64) ([]FlowTurn, error)
	// FlowMore reads up to n more of a group's ready executions at the
	// priority of after that the capabilities allow, the best after it first.
	FlowMore(ctx context.Context, namespace string, capabilities []string, after FlowCandidate, n int64) ([]FlowCandidate, error)
	// FlowReady tells whether a lane has a ready execution that the
	// capabilities allow.
	FlowReady(ctx context.Context, namespace, lane string, capabilities []string) (bool, error)
	// FlowStart starts the executions ids[i] under leases p.LeaseIDs[i] (one
	// no longer waiting is left out), returning the leases in that order.
	FlowStart(ctx context.Context, p ClaimParams, ids []uuid.UUID) ([]ClaimedLease, error)
	// FlowServe records the group a lane served last at a priority to
	// workers of the capabilities.
	FlowServe(ctx context.Context, namespace, lane string, capabilities []string, priority int64, group string) error
	// FlowCount adds claims to the lane's rate window beginning at windowStartMs.
	FlowCount(ctx context.Context, namespace, lane string, windowStartMs, claims int64) error
	// WorkerNextRunAt is the earliest RunAt after now among the worker's
	// scheduled executions (0: none).
	WorkerNextRunAt(ctx context.Context, k WorkerKey, nowMs int64) (int64, error)
}

// FlowClaim claims as ExecutionClaim does for a worker one of whose lanes
// has limits or groups. With dry it starts nothing and writes nothing, for
// a look before the write: it says whether the claim would take any (one
// lease without an id, of the first lane with room and ready work), else
// what held it back and when to look again.
func FlowClaim(ctx context.Context, q FlowQueries, p ClaimParams, dry bool) (ClaimResult, error) {
	var res ClaimResult
	k := WorkerKey{Namespace: p.Namespace, InstanceID: p.InstanceID}
	w, err := q.FlowWorker(ctx, k, p.NowMs)
	if err != nil {
		return res, err
	}
	if w.Due && !dry {
		if err := q.FlowPromote(ctx, p.Namespace, p.NowMs); err != nil {
			return res, err
		}
	}
	// The transaction excludes every other claim (SQLite's single writer):
	// what a claim before this one did is seen.
	lanes, err := q.FlowLanes(ctx, p.Namespace, w.Lanes)
	if err != nil {
		return res, err
	}
	for _, l := range lanes {
		res.Flow = res.Flow || l.Flow()
	}
	want := int64(len(p.LeaseIDs))
	var segs [][]FlowCandidate // each lane's candidates, in the lane's order
	rateHeld := int64(0)       // the earliest window end of a lane its rate holds back
	for _, l := range lanes {
		room, windowEnd := l.room(want, p.NowMs)
		need := room
		if !l.Grouped && l.MaxPerGroup > 0 {
			need = min(need, l.MaxPerGroup-l.Running) // its one group's cap
		}
		if need <= 0 {
			// Held back, when it has ready work.
			if l.Flow() {
				held, err := q.FlowReady(ctx, p.Namespace, l.Lane, w.Capabilities)
				if err != nil {
					return res, err
				}
				if held {
					res.Held++
					if windowEnd > 0 && (rateHeld == 0 || windowEnd < rateHeld) {
						rateHeld = windowEnd
					}
				}
			}
			continue
		}
		if dry {
			need = 1 // a look needs to know of one
		}
		var cands []FlowCandidate
		capped := false
		if l.Grouped {
			cands, capped, err = flowTurns(ctx, q, p.Namespace, l, w.Capabilities, need)
		} else {
			cands, err = q.FlowPick(ctx, p.Namespace, l.Lane, w.Capabilities, need)
			// Its one group's cap, not its work, bounded what it gave.
			capped = l.MaxPerGroup > 0 && l.MaxPerGroup-l.Running < room && int64(len(cands)) >= l.MaxPerGroup-l.Running
		}
		if err != nil {
			return res, err
		}
		if dry && len(cands) > 0 {
			res.Leases = []ClaimedLease{{Namespace: p.Namespace, Lane: l.Lane}}
			return res, nil
		}
		// Held back when a cap or a rate, not the work, bounded what the
		// lane gave.
		if capped || (room < want && int64(len(cands)) >= room) {
			res.Held++
		}
		if len(cands) > 0 {
			segs = append(segs, cands)
		}
	}
	taken, bounded := flowOrder(segs, want, p.Bytes())
	if !dry && len(taken) > 0 {
		ids := make([]uuid.UUID, len(taken))
		for i, c := range taken {
			ids[i] = c.ID
		}
		if res.Leases, err = q.FlowStart(ctx, p, ids); err != nil {
			return res, err
		}
		if err := flowRecord(ctx, q, p, w.Capabilities, lanes, taken, res.Leases); err != nil {
			return res, err
		}
	}
	switch {
	case bounded:
		res.NextRunAtMs = p.NowMs
	case int64(len(res.Leases)) < want:
		next, err := q.WorkerNextRunAt(ctx, k, p.NowMs)
		if err != nil {
			return res, err
		}
		if rateHeld > 0 && (next == 0 || rateHeld < next) {
			next = rateHeld
		}
		res.NextRunAtMs = next
	}
	return res, nil
}

// flowTurns gives up to need of a grouped lane's ready executions in turns:
// at each priority, from the highest down, the groups after the one the
// lane served last there (to workers of these capabilities) in key order,
// then from the first group up to that one, each group's first before any
// group's second. A group at its cap is passed over; capped says a group's
// cap, not its work, bounded what it gave.
func flowTurns(ctx context.Context, q FlowQueries, namespace string, l FlowLane, caps []string, need int64) (out []FlowCandidate, capped bool, err error) {
	type turn struct {
		first     FlowCandidate
		room, got int64 // what the group may give, what it gave
	}
	taken := make(map[string]int64) // each group's candidates of this claim, at higher priorities
	below := int64(math.MaxInt64)
	for int64(len(out)) < need {
		level, last, found, err := q.FlowLevel(ctx, namespace, l.Lane, caps, below)
		if err != nil || !found {
			return out, capped, err
		}
		// Round one: each group's first, in turn, taken a few steps at a
		// time (as many as are still needed, then twice as many each time
		// groups at their cap are passed over).
		var round []turn
		s := FlowStep{Namespace: namespace, Lane: l.Lane, Capabilities: caps, Priority: level, After: last, PerGroup: l.MaxPerGroup}
		steps := need - int64(len(out))
	walk:
		for wrapped := false; int64(len(out)) < need; steps = min(2*steps, 256) {
			turns, err := q.FlowWalk(ctx, s, steps)
			if err != nil {
				return out, capped, err
			}
			for _, t := range turns {
				if wrapped && t.Group > last {
					break walk // round one is done: back to the last served
				}
				s.After, s.FromStart = t.Group, false
				running := t.Running + taken[t.Group]
				if l.MaxPerGroup > 0 && running >= l.MaxPerGroup {
					capped = true // at its cap: passed over
					continue
				}
				room := need
				if l.MaxPerGroup > 0 {
					room = min(need, l.MaxPerGroup-running)
				}
				out = append(out, t.FlowCandidate)
				round = append(round, turn{first: t.FlowCandidate, room: room, got: 1})
				if int64(len(out)) >= need {
					break walk
				}
			}
			if int64(len(turns)) < steps { // no more groups after the last
				if wrapped {
					break
				}
				// Past the last group: from the first, up to the last served.
				wrapped, s.After, s.FromStart = true, "", true
				steps = need - int64(len(out))
			}
		}
		// Rounds two and on: each group's second, then third..., in the same
		// turn, as far as each group's room allows.
		if left := need - int64(len(out)); left > 0 && len(round) > 0 {
			more := make([][]FlowCandidate, len(round))
			for i, t := range round {
				if t.room > 1 {
					if more[i], err = q.FlowMore(ctx, namespace, caps, t.first, min(t.room-1, left)); err != nil {
						return out, capped, err
					}
				}
			}
			for n, added := 0, true; added && int64(len(out)) < need; n++ {
				added = false
				for i := range round {
					if n < len(more[i]) && int64(len(out)) < need {
						out = append(out, more[i][n])
						round[i].got++
						added = true
					}
				}
			}
			if int64(len(out)) < need {
				for _, t := range round {
					capped = capped || (t.room < need && t.got >= t.room)
				}
			}
		}
		for _, t := range round {
			taken[t.first.Group] += t.got
		}
		if level == math.MinInt64 {
			break
		}
		below = level - 1
	}
	return out, capped, nil
}

// room is how many executions the lane may start now (at most want), and
// when its rate holds it back, the end of the current window.
func (l FlowLane) room(want, nowMs int64) (room, windowEnd int64) {
	if l.Paused {
		return 0, 0
	}
	room = want
	if l.MaxRunning > 0 {
		room = min(room, l.MaxRunning-l.Running)
	}
	if l.Rate > 0 {
		start := RateWindow(nowMs, l.RatePeriodMs)
		if l.WindowStartMs > start {
			// A claim of a later window committed first: this claim's now
			// is behind it, and that window's count is not kept. Nothing
			// until its clock reaches the later window.
			return 0, l.WindowStartMs
		}
		used := int64(0)
		if l.WindowStartMs == start {
			used = l.WindowCount
		}
		if left := l.Rate - used; left < room {
			room = left
			if room <= 0 {
				windowEnd = start + l.RatePeriodMs
			}
		}
	}
	return room, windowEnd
}

// RateWindow is the start of the rate window of period periodMs that holds
// nowMs, counted from the Unix epoch.
func RateWindow(nowMs, periodMs int64) int64 { return nowMs - nowMs%periodMs }

// flowOrder takes candidates from the lanes' lists (each in its lane's
// order) best first, up to want and maxBytes of payloads (always the
// first); bounded says it stopped at maxBytes with candidates left. Across
// lanes it is the claim's order: of the lanes' next candidates, the highest
// priority, then the earliest RunAt, then the lowest id.
func flowOrder(segs [][]FlowCandidate, want, maxBytes int64) (taken []FlowCandidate, bounded bool) {
	next := make([]int, len(segs))
	size := int64(0)
	for int64(len(taken)) < want {
		best := -1
		for i, seg := range segs {
			if next[i] == len(seg) {
				continue
			}
			if best < 0 || ClaimCompare(seg[next[i]], segs[best][next[best]]) < 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		c := segs[best][next[best]]
		if size += c.Bytes; len(taken) > 0 && size > maxBytes {
			return taken, true
		}
		next[best]++
		taken = append(taken, c)
	}
	return taken, false
}

// ClaimCompare orders candidates as a claim takes them: higher priority,
// then earlier RunAt, then lower id.
func ClaimCompare(a, b FlowCandidate) int {
	switch {
	case a.Priority != b.Priority:
		return cmp.Compare(b.Priority, a.Priority)
	case a.RunAtMs != b.RunAtMs:
		return cmp.Compare(a.RunAtMs, b.RunAtMs)
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// flowRecord writes what the claim used: each grouped lane's last group
// served at each priority (to workers of these capabilities) and each rated
// lane's count, of what started.
func flowRecord(ctx context.Context, q FlowQueries, p ClaimParams, caps []string, lanes []FlowLane, taken []FlowCandidate, started []ClaimedLease) error {
	ok := make(map[uuid.UUID]bool, len(started))
	for _, l := range started {
		ok[l.ExecutionID] = true
	}
	for _, l := range lanes {
		last := map[int64]string{} // by priority
		var levels []int64
		claims := int64(0)
		for _, c := range taken {
			if c.Lane != l.Lane || !ok[c.ID] {
				continue
			}
			if _, seen := last[c.Priority]; !seen {
				levels = append(levels, c.Priority)
			}
			last[c.Priority] = c.Group
			claims++
		}
		if l.Grouped {
			for _, level := range levels {
				if err := q.FlowServe(ctx, p.Namespace, l.Lane, caps, level, last[level]); err != nil {
					return err
				}
			}
		}
		if l.Rate > 0 && claims > 0 {
			if err := q.FlowCount(ctx, p.Namespace, l.Lane, RateWindow(p.NowMs, l.RatePeriodMs), claims); err != nil {
				return err
			}
		}
	}
	return nil
}
