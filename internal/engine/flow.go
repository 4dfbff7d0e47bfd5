package engine

import (
	"bytes"
	"cmp"
	"context"
	"sort"

	"github.com/google/uuid"
)

// Flow control: the claim of lanes that have limits or groups. A worker
// whose lanes have neither is claimed by each engine's own claim, as
// before; one of whose lanes has either is claimed by FlowClaim on SQLite
// (in one transaction, through FlowQueries), and on PostgreSQL by the
// server-side function roster_flow_claim (schema/postgres, migrations 16 and 17),
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
//  4. each group's room (MaxRunningPerGroup less what runs in the group),
//     and up to that many of the group's best ready executions;
//  5. the order: priority first, then turns (a group's first candidate at
//     each priority before any group's second), then the group served
//     least recently, then RunAt and id; taken in that order while the
//     lane has room;
//  6. the start, then each served group's turn and the rate window's count.
// The two are kept alike by the conformance suite, which both engines run.

// LaneLimits are a lane's limits as stored (0: none).
type LaneLimits struct {
	Namespace, Lane                             string
	MaxRunning, MaxPerGroup, Rate, RatePeriodMs int64
	Paused                                      bool
}

// GroupKey names a group of a lane.
type GroupKey struct{ Namespace, Lane, Group string }

// GroupsOf lists the groups the executions with a group are created in,
// each once, with the empty group of each such lane (executions without a
// group take turns with the groups). None when no execution has a group.
func GroupsOf(es []Execution) []GroupKey {
	var keys []GroupKey
	seen := make(map[GroupKey]bool)
	for _, e := range es {
		if e.Group == "" {
			continue
		}
		for _, k := range []GroupKey{{e.Namespace, e.Lane, ""}, {e.Namespace, e.Lane, e.Group}} {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// FlowLane is a lane's limits and counts for a flow claim.
type FlowLane struct {
	Lane                       string
	Limited, Grouped, Paused   bool
	MaxRunning, MaxPerGroup    int64
	Rate, RatePeriodMs         int64
	WindowStartMs, WindowCount int64
	Running                    int64 // counted when MaxRunning or MaxPerGroup is set
}

// Flow tells whether the lane's claims go through FlowClaim.
func (l FlowLane) Flow() bool { return l.Limited || l.Grouped }

// FlowGroup is a group of a lane: when it was last served, and how many of
// its executions run (counted when asked).
type FlowGroup struct {
	Group     string
	ServedSeq int64
	Running   int64
}

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

// FlowQueries are the statements of a flow claim (FlowClaim), run in one
// transaction.
type FlowQueries interface {
	// FlowWorker reads an alive worker's lanes and capabilities (ErrNoRows:
	// not alive, or being deleted).
	FlowWorker(ctx context.Context, k WorkerKey, nowMs int64) (FlowWorker, error)
	// FlowPromote makes due scheduled executions of the namespace ready.
	FlowPromote(ctx context.Context, namespace string, nowMs int64) error
	// FlowLanes reads each lane's limits and counts, in lane order.
	FlowLanes(ctx context.Context, namespace string, lanes []string) ([]FlowLane, error)
	// FlowGroups reads a lane's groups, counting their running executions
	// when countRunning.
	FlowGroups(ctx context.Context, namespace, lane string, countRunning bool) ([]FlowGroup, error)
	// FlowPick reads up to limits[i] of the best ready executions of group
	// groups[i] of a lane that the capabilities allow.
	FlowPick(ctx context.Context, namespace, lane string, capabilities, groups []string, limits []int64) ([]FlowCandidate, error)
	// FlowReady tells whether one of the groups of a lane has a ready
	// execution that the capabilities allow.
	FlowReady(ctx context.Context, namespace, lane string, capabilities, groups []string) (bool, error)
	// FlowStart starts the executions ids[i] under leases p.LeaseIDs[i] (one
	// no longer waiting is left out), returning the leases in that order.
	FlowStart(ctx context.Context, p ClaimParams, ids []uuid.UUID) ([]ClaimedLease, error)
	// FlowServe records each group's new served sequence.
	FlowServe(ctx context.Context, namespace, lane string, groups []string, seqs []int64) error
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
	flow := false
	for _, l := range lanes {
		flow = flow || l.Flow()
	}
	res.Flow = flow
	want := int64(len(p.LeaseIDs))
	var cands []flowCandidate
	room := make(map[string]int64, len(lanes))
	seqs := make(map[string]int64, len(lanes)) // the highest served sequence of each grouped lane
	rateHeld := int64(0)                       // the earliest window end of a lane its rate holds back
	for _, l := range lanes {
		r, windowEnd := l.room(want, p.NowMs)
		var groups []FlowGroup
		if l.Grouped {
			if groups, err = q.FlowGroups(ctx, p.Namespace, l.Lane, l.MaxPerGroup > 0); err != nil {
				return res, err
			}
		} else {
			groups = []FlowGroup{{Running: l.Running}} // one group: ''
		}
		for _, g := range groups {
			seqs[l.Lane] = max(seqs[l.Lane], g.ServedSeq)
		}
		if r <= 0 {
			// Held back, when it has ready work.
			if l.Flow() {
				held, err := q.FlowReady(ctx, p.Namespace, l.Lane, w.Capabilities, groupNames(groups))
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
		room[l.Lane] = r
		var names, full []string
		var limits []int64
		served := make(map[string]int64, len(groups))
		for _, g := range groups {
			gr := min(r, want)
			if l.MaxPerGroup > 0 {
				gr = min(gr, l.MaxPerGroup-g.Running)
			}
			if gr > 0 {
				names = append(names, g.Group)
				limits = append(limits, gr)
				served[g.Group] = g.ServedSeq
			} else {
				full = append(full, g.Group)
			}
		}
		if len(full) > 0 {
			// Groups at their cap hold back what they have ready.
			held, err := q.FlowReady(ctx, p.Namespace, l.Lane, w.Capabilities, full)
			if err != nil {
				return res, err
			}
			if held {
				res.Held++
			}
		}
		if len(names) == 0 {
			continue
		}
		if dry {
			// The claim takes one at least when a group with room has
			// ready work: that is all a look needs to know.
			ready, err := q.FlowReady(ctx, p.Namespace, l.Lane, w.Capabilities, names)
			if err != nil || !ready {
				if err != nil {
					return res, err
				}
				continue
			}
			res.Leases = []ClaimedLease{{Namespace: p.Namespace, Lane: l.Lane}}
			return res, nil
		}
		picked, err := q.FlowPick(ctx, p.Namespace, l.Lane, w.Capabilities, names, limits)
		if err != nil {
			return res, err
		}
		perGroup := make(map[string]int64, len(names))
		for _, c := range picked {
			cands = append(cands, flowCandidate{FlowCandidate: c, served: served[c.Group]})
			perGroup[c.Group]++
		}
		// Held back when a cap, a rate or a group's cap, not the work,
		// bounded what was picked.
		held := r < want && int64(len(picked)) >= r
		for i, g := range names {
			held = held || (limits[i] < min(r, want) && perGroup[g] >= limits[i])
		}
		if held {
			res.Held++
		}
	}
	taken, bounded := flowOrder(cands, room, want, p.Bytes())
	if dry {
		for _, c := range taken {
			res.Leases = append(res.Leases, ClaimedLease{ExecutionID: c.ID, Namespace: p.Namespace, Lane: c.Lane})
		}
	} else if len(taken) > 0 {
		ids := make([]uuid.UUID, len(taken))
		for i, c := range taken {
			ids[i] = c.ID
		}
		if res.Leases, err = q.FlowStart(ctx, p, ids); err != nil {
			return res, err
		}
		if err := flowRecord(ctx, q, p, lanes, taken, res.Leases, seqs); err != nil {
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

type flowCandidate struct {
	FlowCandidate
	served int64 // the group's served sequence
	turn   int   // 1 for a group's best candidate at its priority, 2 for its next...
}

// flowOrder takes candidates best first, up to want and maxBytes of
// payloads (always the first), each lane at most its room; bounded says it
// stopped at maxBytes with candidates left. Within a lane the order is fair:
// priority, then turns (each group's first candidate at a priority before
// any group's second), then the group served least recently, then RunAt and
// id. Across lanes it is the claim's order: of the lanes' next candidates,
// the highest priority, then the earliest RunAt, then the lowest id.
func flowOrder(cands []flowCandidate, room map[string]int64, want, maxBytes int64) (taken []flowCandidate, bounded bool) {
	type key struct {
		lane, group string
		priority    int64
	}
	turns := make(map[key]int)
	byLane := make(map[string][]flowCandidate)
	var lanes []string
	for _, c := range cands { // each group's candidates come best first from FlowPick
		k := key{c.Lane, c.Group, c.Priority}
		turns[k]++
		c.turn = turns[k]
		if byLane[c.Lane] == nil {
			lanes = append(lanes, c.Lane)
		}
		byLane[c.Lane] = append(byLane[c.Lane], c)
	}
	for _, lane := range lanes {
		sort.SliceStable(byLane[lane], func(i, j int) bool {
			a, b := byLane[lane][i], byLane[lane][j]
			switch {
			case a.Priority != b.Priority:
				return a.Priority > b.Priority
			case a.turn != b.turn:
				return a.turn < b.turn
			case a.served != b.served:
				return a.served < b.served
			}
			return claimOrder(a, b)
		})
	}
	next := make(map[string]int, len(lanes))
	size := int64(0)
	for int64(len(taken)) < want {
		best := ""
		for _, lane := range lanes {
			if next[lane] == len(byLane[lane]) || int64(next[lane]) >= room[lane] {
				continue
			}
			if best == "" || claimOrder(byLane[lane][next[lane]], byLane[best][next[best]]) {
				best = lane
			}
		}
		if best == "" {
			break
		}
		c := byLane[best][next[best]]
		if size += c.Bytes; len(taken) > 0 && size > maxBytes {
			return taken, true
		}
		next[best]++
		taken = append(taken, c)
	}
	return taken, false
}

// claimOrder tells whether a comes before b in the claim's order.
func claimOrder(a, b flowCandidate) bool { return ClaimCompare(a.FlowCandidate, b.FlowCandidate) < 0 }

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

// flowRecord writes what the claim used: each grouped lane's served groups
// (the last served gets the highest sequence) and each rated lane's count.
func flowRecord(ctx context.Context, q FlowQueries, p ClaimParams, lanes []FlowLane, taken []flowCandidate, started []ClaimedLease, seqs map[string]int64) error {
	ok := make(map[uuid.UUID]bool, len(started))
	for _, l := range started {
		ok[l.ExecutionID] = true
	}
	for _, l := range lanes {
		var groups []string
		var served []int64
		at := make(map[string]int)
		claims := int64(0)
		for _, c := range taken {
			if c.Lane != l.Lane || !ok[c.ID] {
				continue
			}
			claims++
			if !l.Grouped {
				continue
			}
			seqs[l.Lane]++
			if i, seen := at[c.Group]; seen {
				served[i] = seqs[l.Lane]
				continue
			}
			at[c.Group] = len(groups)
			groups = append(groups, c.Group)
			served = append(served, seqs[l.Lane])
		}
		if len(groups) > 0 {
			if err := q.FlowServe(ctx, p.Namespace, l.Lane, groups, served); err != nil {
				return err
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

func groupNames(gs []FlowGroup) []string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.Group
	}
	return names
}
