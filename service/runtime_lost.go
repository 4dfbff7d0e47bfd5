package service

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// Lost leases reach their handlers at once: a cancel, a mark-dead, a sweep
// or a reclaim made through any Store on the database ends the running
// handler's context within milliseconds, not at its next renewal (a bound
// lease has none). The watcher hears of such changes (PostgreSQL: the
// roster_lost notification of the namespace; SQLite: the change check,
// which sees every commit) and asks the database, in one read, which of the
// leases whose handlers run are still held; it also asks at every poll, the
// safety net where notifications cannot reach (behind PgBouncer).

// lostCheckGap is the least time between two checks: a flood of changes
// (SQLite's change check sees every commit) costs a busy worker at most one
// read per gap.
const lostCheckGap = 20 * time.Millisecond

// watchLost runs the watcher until stop.
func (w *runner) watchLost(stop <-chan struct{}) {
	sub := w.s.eng.Subscribe(engine.LostKey(w.a.Namespace))
	defer sub.Close()
	sub.Arm()
	poll := max(w.a.TTL/3, w.s.cfg.workerPoll)
	t := time.NewTimer(poll)
	defer t.Stop()
	lost := w.s.lost.wait()
	for {
		select {
		case <-stop:
			return
		case <-sub.C():
		case <-lost:
		case <-t.C:
		}
		// The next signal's channel is taken before the check: one sent
		// during the check or the gap after it is not missed.
		lost = w.s.lost.wait()
		w.checkHeld()
		t.Reset(poll)
		// Disarmed for the gap: SQLite's change check, which every commit
		// of this worker's own wakes, then runs only while something else
		// waits on it. Armed again, it looks at once, and a change made
		// meanwhile shows (it compares with what it saw last).
		sub.Disarm()
		select {
		case <-stop:
			return
		case <-time.After(lostCheckGap):
		}
		sub.Arm()
	}
}

// checkHeld reads which of the leases whose handlers run are still held and
// ends the handlers of the others (ErrLeaseLost). A job whose handler
// returned is not asked about: its outcome is the settler's.
func (w *runner) checkHeld() {
	w.jobsMu.Lock()
	running := make(map[uuid.UUID]*job, len(w.jobs))
	for j := range w.jobs {
		if !j.isSettled() && !j.isLost() {
			running[j.lease.LeaseID] = j
		}
	}
	w.jobsMu.Unlock()
	if len(running) == 0 {
		return
	}
	ids := make([]uuid.UUID, 0, len(running))
	for id := range running {
		ids = append(ids, id)
	}
	key := engine.WorkerKey{Namespace: w.a.Namespace, InstanceID: w.a.InstanceID}
	var held []engine.LeaseRef
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := w.s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		held, err = q.LeaseFindHeld(ctx, key, ids)
		return err
	})
	if err != nil {
		w.log.warn("roster: worker: checking which leases are still held failed; will retry", "err", err)
		return
	}
	for _, h := range held {
		if j := running[h.LeaseID]; j != nil && j.lease.Epoch == h.Epoch {
			delete(running, h.LeaseID)
		}
	}
	w.jobsMu.Lock()
	defer w.jobsMu.Unlock()
	for _, j := range running {
		if _, ok := w.jobs[j]; ok && !j.isSettled() { // its handler still runs
			w.log.Info("roster: worker: lease ended elsewhere; cancelling its handler", "execution", j.lease.ExecutionID)
			j.lose(ErrLeaseLost)
		}
	}
}
