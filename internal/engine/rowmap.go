package engine

import "context"

// Rows builds the n results of a list query from its rows, row(i) mapping
// the i-th: the one shape of every list an engine returns. A query error
// (err) comes back translated, with no rows.
func Rows[T any](n int, err error, translate func(error) error, row func(i int) T) ([]T, error) {
	if err != nil {
		return nil, translate(err)
	}
	out := make([]T, n)
	for i := range out {
		out[i] = row(i)
	}
	return out, nil
}

// RowsErr is Rows for a mapping that can fail (a stored list that does not
// parse): the first failure is the error, with no rows.
func RowsErr[T any](n int, err error, translate func(error) error, row func(i int) (T, error)) ([]T, error) {
	if err != nil {
		return nil, translate(err)
	}
	out := make([]T, n)
	for i := range out {
		if out[i], err = row(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Some generated rows have the very fields of a row type here, in both
// engines (the same columns, of types both drivers read alike): those convert
// as they are, once for both engines, through the constraints below.

// WorkerEventRow is a generated row of worker_events.
type WorkerEventRow interface {
	~struct {
		Seq                         int64
		Namespace, InstanceID, Kind string
		AtMs                        int64
		Reason                      string
	}
}

// WorkerEvents is Rows for generated rows of worker_events.
func WorkerEvents[R WorkerEventRow](rows []R, err error, translate func(error) error) ([]WorkerEvent, error) {
	return Rows(len(rows), err, translate, func(i int) WorkerEvent { return WorkerEvent(rows[i]) })
}

// The rows of the Stats queries (queries/ENGINE/stats.sql).
type (
	statsWorkersRow = struct {
		Namespace     string
		Alive, Lapsed int64
	}
	statsExpiredRow = struct {
		Namespace string
		Expired   int64
	}
	statsLanesRow = struct {
		Namespace, Lane           string
		Ready, Scheduled, Running int64
		OldestReadyMs             int64
	}
	statsAgentsRow = struct {
		State string
		N     int64
	}
	statsLaneWorkersRow = struct {
		Namespace, Lane string
		Alive           int64
	}
)

// ReadStats runs an engine's five Stats queries at atMs (workers, expired
// leases, lanes, agents per state, alive workers per lane, as generated) and
// assembles their rows; the first failing query's error comes back
// translated.
func ReadStats[W ~statsWorkersRow, E ~statsExpiredRow, L ~statsLanesRow, A ~statsAgentsRow, LW ~statsLaneWorkersRow](
	ctx context.Context, atMs int64, translate func(error) error,
	workers func(context.Context, int64) ([]W, error),
	expired func(context.Context, int64) ([]E, error),
	lanes func(context.Context, int64) ([]L, error),
	agents func(context.Context) ([]A, error),
	laneWorkers func(context.Context, int64) ([]LW, error),
) (StatsRows, error) {
	var out StatsRows
	ws, err := workers(ctx, atMs)
	if err != nil {
		return out, translate(err)
	}
	for _, r := range ws {
		out.Workers = append(out.Workers, NamespaceWorkers(r))
	}
	es, err := expired(ctx, atMs)
	if err != nil {
		return out, translate(err)
	}
	for _, r := range es {
		e := statsExpiredRow(r)
		out.ExpiredLeases = append(out.ExpiredLeases, NamespaceCount{Namespace: e.Namespace, N: e.Expired})
	}
	ls, err := lanes(ctx, atMs)
	if err != nil {
		return out, translate(err)
	}
	for _, r := range ls {
		out.Lanes = append(out.Lanes, LaneCounts(r))
	}
	as, err := agents(ctx)
	if err != nil {
		return out, translate(err)
	}
	out.Agents = make(map[string]int64, len(as))
	for _, r := range as {
		a := statsAgentsRow(r)
		out.Agents[a.State] = a.N
	}
	lw, err := laneWorkers(ctx, atMs)
	if err != nil {
		return out, translate(err)
	}
	for _, r := range lw {
		out.LaneWorkers = append(out.LaneWorkers, LaneWorkers(r))
	}
	return out, nil
}
