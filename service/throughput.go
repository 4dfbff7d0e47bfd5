package service

import (
	"context"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// LaneMinute counts the executions of one lane that completed and that
// failed (for good: no attempt left) in one minute.
type LaneMinute struct {
	Namespace, Lane   string
	Minute            time.Time // the minute's start, UTC
	Completed, Failed int
}

// Throughput counts, per lane and minute, the executions that completed or
// failed at or after since (which it rounds down to its minute), ordered by
// (Namespace, Lane, Minute); minutes with neither are left out. It reads
// the index of finished executions from since on, so its cost follows the
// window, not the history, and it writes nothing (a read-only Store may
// call it). A retried failure that will run again has not failed yet:
// only executions that ended count.
func (s *Store) Throughput(ctx context.Context, since time.Time) ([]LaneMinute, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	if err := validTime("since", since); err != nil {
		return nil, err
	}
	since = since.Truncate(time.Minute)
	var rows []engine.FinishedCount
	err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		rows, err = q.ExecutionFinishedPerMinute(ctx, since.UnixMilli())
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []LaneMinute
	for _, r := range rows { // ordered by (namespace, lane, minute, state)
		at := time.UnixMilli(r.Minute * 60000).UTC()
		if n := len(out); n == 0 || out[n-1].Namespace != r.Namespace || out[n-1].Lane != r.Lane || !out[n-1].Minute.Equal(at) {
			out = append(out, LaneMinute{Namespace: r.Namespace, Lane: r.Lane, Minute: at})
		}
		m := &out[len(out)-1]
		if r.State == string(ExecutionCompleted) {
			m.Completed += int(r.N)
		} else {
			m.Failed += int(r.N)
		}
	}
	return out, nil
}
