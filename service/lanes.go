package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// LaneLimits are the flow-control limits of one lane of a namespace, held
// fleet-wide: by every Store, process and host on one database, inside the
// claim itself. A lane without limits is claimed as if this did not exist.
//
// Caps hold at every instant: the running executions of the lane never
// number more than MaxRunning, nor those of one (lane, Group) more than
// MaxRunningPerGroup, however many workers claim at once. A claim that a cap
// forbids takes other claimable work instead (another lane, another group)
// and returns ErrNoWork only when there is none; a batch claim takes up to
// what the caps allow. A cap lowered below what runs stops new claims of
// the lane until the count is under it; running executions go on.
//
// Rate limits the claims of the lane that begin in each window
// [k·RatePeriod, (k+1)·RatePeriod) counted from the Unix epoch by the
// Store's clock (on PostgreSQL the claim's now): every execution claimed
// counts one, whatever its outcome.
//
// Paused: nobody claims from the lane; running executions go on. Putting
// the limits with Paused false, or deleting them, resumes it and wakes idle
// workers as new work does.
type LaneLimits struct {
	Namespace, Lane    string        // identifiers
	MaxRunning         int           // 0: no cap
	MaxRunningPerGroup int           // 0: no cap
	Rate               int           // 0: no rate limit
	RatePeriod         time.Duration // 1 s to 24 h, exactly when Rate > 0; kept to the millisecond
	Paused             bool
}

// maxRatePeriod bounds LaneLimits.RatePeriod.
const maxRatePeriod = 24 * time.Hour

func (l LaneLimits) row() (engine.LaneLimits, error) {
	if err := validIdentifier("Namespace", l.Namespace); err != nil {
		return engine.LaneLimits{}, err
	}
	if err := validIdentifier("Lane", l.Lane); err != nil {
		return engine.LaneLimits{}, err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxRunning", l.MaxRunning}, {"MaxRunningPerGroup", l.MaxRunningPerGroup}, {"Rate", l.Rate}} {
		if f.v < 0 {
			return engine.LaneLimits{}, invalid(f.name, "%d is negative", f.v)
		}
	}
	switch {
	case l.Rate > 0 && l.RatePeriod == 0:
		return engine.LaneLimits{}, invalid("RatePeriod", "is required with a Rate")
	case l.Rate == 0 && l.RatePeriod != 0:
		return engine.LaneLimits{}, invalid("RatePeriod", "%v is given without a Rate", l.RatePeriod)
	case l.Rate > 0 && (l.RatePeriod < time.Second || l.RatePeriod > maxRatePeriod):
		return engine.LaneLimits{}, invalid("RatePeriod", "%v is outside 1s..24h", l.RatePeriod)
	}
	return engine.LaneLimits{
		Namespace: l.Namespace, Lane: l.Lane, MaxRunning: int64(l.MaxRunning), MaxPerGroup: int64(l.MaxRunningPerGroup),
		Rate: int64(l.Rate), RatePeriodMs: l.RatePeriod.Milliseconds(), Paused: l.Paused,
	}, nil
}

func laneLimitsFromRow(r engine.LaneLimits) LaneLimits {
	return LaneLimits{
		Namespace: r.Namespace, Lane: r.Lane, MaxRunning: int(r.MaxRunning), MaxRunningPerGroup: int(r.MaxPerGroup),
		Rate: int(r.Rate), RatePeriod: time.Duration(r.RatePeriodMs) * time.Millisecond, Paused: r.Paused,
	}
}

// PutLaneLimits creates or replaces a lane's limits (the claims already
// counted in the current rate window stay counted) and wakes idle workers,
// in this process and every other: a resumed lane or a raised cap may have
// work for them. Bad limits are ErrInvalidInput naming the field, and
// nothing is written.
func (s *Store) PutLaneLimits(ctx context.Context, l LaneLimits) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	row, err := l.row()
	if err != nil {
		return err
	}
	if err := s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error { return q.LaneLimitsPut(ctx, row) }); err != nil {
		return err
	}
	s.work.signal()
	return nil
}

// ListLaneLimits returns the limits of a namespace's lanes ("" = every
// namespace), ordered by (Namespace, Lane).
func (s *Store) ListLaneLimits(ctx context.Context, namespace string) ([]LaneLimits, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	if err := validOptionalIdentifier("namespace", namespace); err != nil {
		return nil, err
	}
	var out []LaneLimits
	err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		rows, err := q.LaneLimitsList(ctx, namespace)
		out = make([]LaneLimits, len(rows))
		for i, r := range rows {
			out[i] = laneLimitsFromRow(r)
		}
		return err
	})
	return out, err
}

// DeleteLaneLimits removes a lane's limits (ErrNotFound when it has none):
// the lane is claimed without limits from then on, and idle workers wake.
func (s *Store) DeleteLaneLimits(ctx context.Context, namespace, lane string) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validIdentifier("namespace", namespace); err != nil {
		return err
	}
	if err := validIdentifier("lane", lane); err != nil {
		return err
	}
	err := s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		err := q.LaneLimitsDelete(ctx, namespace, lane)
		if errors.Is(err, engine.ErrNoRows) {
			return fmt.Errorf("%w: no limits for lane %q in namespace %q", ErrNotFound, lane, namespace)
		}
		return err
	})
	if err != nil {
		return err
	}
	s.work.signal()
	return nil
}

// touchTurns records the lanes of the rows that have a group before the
// rows are written (a claim that sees the rows sees that their lanes take
// turns), once per lane and Store: a lane's record is never removed. It is
// a write of its own: a lane recorded for rows that then fail to be written
// costs nothing but a row.
func (s *Store) touchTurns(ctx context.Context, rows []engine.Execution) error {
	var fresh []engine.Execution
	for _, r := range rows {
		if r.Group != "" && !s.turned.Has(engine.LaneKey{Namespace: r.Namespace, Lane: r.Lane}) {
			fresh = append(fresh, r)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	err := s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error { return q.LaneTurnsTouch(ctx, fresh) })
	if err == nil {
		for _, k := range engine.GroupedLanes(fresh) {
			s.turned.Set(k, true)
		}
	}
	return err
}
