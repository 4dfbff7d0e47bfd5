package engine

import (
	"context"

	"github.com/google/uuid"
)

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

// Some generated rows are the same struct in both engines (the same columns,
// of types both drivers read alike), some of them with the very fields of a
// row type here: those map (or convert as they are) once for both engines,
// through the constraints below.

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

// leaseRefRow is a generated row that names a lease (LeaseFindHeld's,
// LeaseCompleteMany's).
type leaseRefRow = struct {
	ID      uuid.UUID
	Epoch   int64
	LeaseID uuid.NullUUID
}

// LeaseRefs is Rows for generated rows that name leases.
func LeaseRefs[R ~leaseRefRow](rows []R, err error, translate func(error) error) ([]LeaseRef, error) {
	return Rows(len(rows), err, translate, func(i int) LeaseRef {
		r := leaseRefRow(rows[i])
		return LeaseRef{ExecutionID: r.ID, LeaseID: r.LeaseID.UUID, Epoch: r.Epoch}
	})
}

// Other generated rows differ between the engines in a few column types
// only, which the row types below take as type parameters, so that one
// function maps the rows (or builds the parameters) of both engines: a
// nullable text T is sql.NullString on SQLite and pgtype.Text on PostgreSQL
// (the same struct), a nullable integer I sql.NullInt64 or pgtype.Int8 (the
// same struct), and a list of strings L (lanes, capabilities, visible
// namespaces) is stored as the engine's Lists say.

// nullText is the struct of a generated nullable text.
type nullText = struct {
	String string
	Valid  bool
}

// NullText is a generated nullable text: sql.NullString, pgtype.Text.
type NullText interface{ ~nullText }

// Text maps "" to NULL: optional identifiers are NULL when absent.
func Text[T NullText](s string) T { return T{String: s, Valid: s != ""} }

// textOf is the string of a nullable text ("" for NULL).
func textOf[T NullText](t T) string { return nullText(t).String }

// nullInt is the struct of a generated nullable integer.
type nullInt = struct {
	Int64 int64
	Valid bool
}

// NullInt is a generated nullable integer: sql.NullInt64, pgtype.Int8.
type NullInt interface{ ~nullInt }

// intOf is the value of a nullable integer (0 for NULL).
func intOf[I NullInt](i I) int64 { return nullInt(i).Int64 }

// NonNilBytes returns b, or an empty slice for nil: a nil one would be
// stored as NULL, not empty.
func NonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Lists is how an engine stores a list of strings (lanes, capabilities,
// visible namespaces) in a column of Go type L: SQLite as a JSON array,
// PostgreSQL as a text[].
type Lists[L any] interface {
	// Store encodes vs for a parameter: nil is the empty list, not NULL.
	Store(vs []string) L
	// Load decodes a stored list, nil when it is empty.
	Load(stored L) ([]string, error)
}

// workerRow is a generated row of workers.
type workerRow[L any] = struct {
	Namespace, InstanceID, WorkerID        string
	Lanes, Capabilities                    L
	LastHeartbeatMs, TtlMs, RegisteredAtMs int64
}

// WorkerFromRow maps a generated row of workers.
func WorkerFromRow[R ~workerRow[L], L any](r R, lists Lists[L]) (Worker, error) {
	w := workerRow[L](r)
	lanes, err := lists.Load(w.Lanes)
	if err != nil {
		return Worker{}, err
	}
	caps, err := lists.Load(w.Capabilities)
	if err != nil {
		return Worker{}, err
	}
	return Worker{
		Namespace: w.Namespace, InstanceID: w.InstanceID, WorkerID: w.WorkerID,
		Lanes: lanes, Capabilities: caps,
		LastHeartbeatMs: w.LastHeartbeatMs, TTLMs: w.TtlMs, RegisteredAtMs: w.RegisteredAtMs,
	}, nil
}

// agentRow is a generated row of agents, and the parameters of AgentInsert
// and AgentSpawn (every column, in order).
type agentRow[T NullText, L any] = struct {
	ID, State                                       string
	TerminalReason                                  T
	Provider                                        string
	ProviderSessionID, CheckpointSessionID          T
	CheckpointCursor                                int64
	OwnerActor, OwnerPeerClass, OwnerWriteNamespace string
	OwnerVisibleNamespaces                          L
	SpawnFingerprint                                string
	SpawnedAtMs, StateChangedAtMs                   int64
	IdempotencyKey, Host                            T
	HolderNamespace, HolderInstanceID               T
}

// AgentParams are the parameters of AgentInsert and AgentSpawn that store
// a (its optional fields NULL when absent).
func AgentParams[P ~agentRow[T, L], T NullText, L any](a Agent, lists Lists[L]) P {
	return P{
		ID:                     a.ID,
		State:                  a.State,
		TerminalReason:         Text[T](a.TerminalReason),
		Provider:               a.Provider,
		ProviderSessionID:      Text[T](a.ProviderSessionID),
		CheckpointSessionID:    Text[T](a.CheckpointSessionID),
		CheckpointCursor:       a.CheckpointCursor,
		OwnerActor:             a.OwnerActor,
		OwnerPeerClass:         a.OwnerPeerClass,
		OwnerWriteNamespace:    a.OwnerWriteNamespace,
		OwnerVisibleNamespaces: lists.Store(a.OwnerVisibleNamespaces),
		SpawnFingerprint:       a.SpawnFingerprint,
		SpawnedAtMs:            a.SpawnedAtMs,
		StateChangedAtMs:       a.StateChangedAtMs,
		IdempotencyKey:         Text[T](a.IdempotencyKey),
		Host:                   Text[T](a.Host),
		HolderNamespace:        Text[T](a.HolderNamespace),
		HolderInstanceID:       Text[T](a.HolderInstanceID),
	}
}

// AgentFromRow maps a generated row of agents.
func AgentFromRow[R ~agentRow[T, L], T NullText, L any](r R, lists Lists[L]) (Agent, error) {
	a := agentRow[T, L](r)
	visible, err := lists.Load(a.OwnerVisibleNamespaces)
	if err != nil {
		return Agent{}, err
	}
	return Agent{
		ID:                     a.ID,
		State:                  a.State,
		TerminalReason:         textOf(a.TerminalReason),
		Provider:               a.Provider,
		ProviderSessionID:      textOf(a.ProviderSessionID),
		CheckpointSessionID:    textOf(a.CheckpointSessionID),
		CheckpointCursor:       a.CheckpointCursor,
		OwnerActor:             a.OwnerActor,
		OwnerPeerClass:         a.OwnerPeerClass,
		OwnerWriteNamespace:    a.OwnerWriteNamespace,
		OwnerVisibleNamespaces: visible,
		SpawnFingerprint:       a.SpawnFingerprint,
		SpawnedAtMs:            a.SpawnedAtMs,
		StateChangedAtMs:       a.StateChangedAtMs,
		IdempotencyKey:         textOf(a.IdempotencyKey),
		Host:                   textOf(a.Host),
		HolderNamespace:        textOf(a.HolderNamespace),
		HolderInstanceID:       textOf(a.HolderInstanceID),
	}, nil
}

// scheduleRow is a generated row of schedules.
type scheduleRow[T NullText, I NullInt, L any] = struct {
	Namespace, Name             string
	EveryMs                     I
	Cron                        T
	Lane                        string
	Priority                    int64
	RequiredCapabilities        L
	MaxAttempts, RetryBackoffMs int64
	Paused                      bool
	NextRunAtMs                 int64
	LastExecutionID             uuid.NullUUID
	UpdatedAtMs                 int64
	Payload                     []byte
	TimeoutMs                   int64
}

// ScheduleFromRow maps a generated row of schedules (LastState, which is
// not a column, is left "").
func ScheduleFromRow[R ~scheduleRow[T, I, L], T NullText, I NullInt, L any](r R, lists Lists[L]) (Schedule, error) {
	s := scheduleRow[T, I, L](r)
	caps, err := lists.Load(s.RequiredCapabilities)
	if err != nil {
		return Schedule{}, err
	}
	return Schedule{
		Namespace: s.Namespace, Name: s.Name, EveryMs: intOf(s.EveryMs), Cron: textOf(s.Cron), Lane: s.Lane,
		Priority: s.Priority, RequiredCapabilities: caps, MaxAttempts: s.MaxAttempts, RetryBackoffMs: s.RetryBackoffMs,
		TimeoutMs: s.TimeoutMs, Payload: s.Payload, Paused: s.Paused, NextRunAtMs: s.NextRunAtMs,
		LastExecutionID: s.LastExecutionID.UUID, UpdatedAtMs: s.UpdatedAtMs,
	}, nil
}

// expiredLeaseRow is a generated row of LeaseListExpired.
type expiredLeaseRow[T NullText, I NullInt] = struct {
	ID              uuid.UUID
	LeaseID         uuid.NullUUID
	Attempts, Epoch int64
	Namespace       string
	Holder          T
	ExpiresAtMs     I
}

// ExpiredLeases is Rows for the generated rows of LeaseListExpired.
func ExpiredLeases[R ~expiredLeaseRow[T, I], T NullText, I NullInt](rows []R, err error, translate func(error) error) ([]ExpiredLease, error) {
	return Rows(len(rows), err, translate, func(i int) ExpiredLease {
		r := expiredLeaseRow[T, I](rows[i])
		return ExpiredLease{
			ExecutionID: r.ID, LeaseID: r.LeaseID.UUID, AttemptIndex: r.Attempts, Epoch: r.Epoch,
			Namespace: r.Namespace, InstanceID: textOf(r.Holder), ExpiresAtMs: intOf(r.ExpiresAtMs),
		}
	})
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

// Flag is a generated boolean: a bool on PostgreSQL, an integer 0 or 1 on
// SQLite (whose STRICT tables have no boolean type).
type Flag interface{ bool | int64 }

// flagOf is the truth of a generated boolean.
func flagOf[F Flag](f F) bool {
	if b, ok := any(f).(bool); ok {
		return b
	}
	return any(f).(int64) != 0
}

// flagFor is b as a generated boolean.
func flagFor[F Flag](b bool) F {
	var f F
	switch p := any(&f).(type) {
	case *bool:
		*p = b
	case *int64:
		if b {
			*p = 1
		}
	}
	return f
}

// laneLimitsRow is a generated row of LaneLimitsList, and the parameters of
// LaneLimitsPut.
type laneLimitsRow[F Flag] = struct {
	Namespace, Lane                                    string
	MaxRunning, MaxRunningPerGroup, Rate, RatePeriodMs int64
	Paused                                             F
}
