package engine

import (
	"context"

	"github.com/google/uuid"
)

// The operations below are written once for both engines: over an engine's
// generated queries, whose parameter and row types are the same structs in
// both but for a nullable text (T), a list of strings (L) and the integer
// type of a batch size (N). The type parameters are inferred from the
// generated queries' methods: an engine calls NewWorkerOps, NewAgentOps, ...
// on its generated Queries value and embeds what they return. Building
// them costs a few small allocations per transaction (about half a
// microsecond), next to a round trip to the database.

// BatchSize is the type of a generated batch-size parameter: int32 on
// PostgreSQL (a LIMIT's), int64 on SQLite.
type BatchSize interface{ ~int32 | ~int64 }

type (
	workerKeyParams   = struct{ Namespace, InstanceID string }
	workerAliveParams = struct {
		Namespace, InstanceID string
		Now                   int64
	}
	workerRefreshParams[L any] = struct {
		Lanes, Capabilities   L
		Now, TtlMs            int64
		Namespace, InstanceID string
		WorkerID              string
	}
	workerRegisterParams[L any] = struct {
		Namespace, InstanceID, WorkerID string
		Lanes, Capabilities             L
		Now, TtlMs                      int64
	}
	workerSweepParams[N BatchSize] = struct {
		Now       int64
		BatchSize N
	}
	workerEventAppendParams = struct {
		Namespace, InstanceID, Kind string
		AtMs                        int64
		Reason                      string
	}
	workerEventPruneParams[N BatchSize] = struct {
		BeforeMs  int64
		BatchSize N
	}
)

// workerQueries is what WorkerOps use of an engine's generated queries.
type workerQueries[
	R ~workerRow[L], E WorkerEventRow, L any, N BatchSize,
	Get ~workerKeyParams, Alive ~workerAliveParams, Refresh ~workerRefreshParams[L], Register ~workerRegisterParams[L],
	Sweep ~workerSweepParams[N], Swept ~workerKeyParams, Append ~workerEventAppendParams, Prune ~workerEventPruneParams[N],
] interface {
	WorkerGet(context.Context, Get) (R, error)
	WorkerGetAlive(context.Context, Alive) (R, error)
	WorkerRefresh(context.Context, Refresh) (int64, error)
	WorkerRegister(context.Context, Register) (int64, error)
	WorkerSweepBatch(context.Context, Sweep) ([]Swept, error)
	WorkerEventAppend(context.Context, Append) error
	WorkerEventPruneBatch(context.Context, Prune) (int64, error)
}

// NewWorkerOps returns WorkerOps on an engine's generated queries q, which
// store lists as lists say, with the list operations of workers and of
// their events on q; every driver error passes through translate.
func NewWorkerOps[
	R ~workerRow[L], E WorkerEventRow, L any, N BatchSize,
	Get ~workerKeyParams, Alive ~workerAliveParams, Refresh ~workerRefreshParams[L], Register ~workerRegisterParams[L],
	Sweep ~workerSweepParams[N], Swept ~workerKeyParams, Append ~workerEventAppendParams, Prune ~workerEventPruneParams[N],
](
	q workerQueries[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune],
	lists Lists[L], translate func(error) error,
	workers func(context.Context, int, any) ([]R, error), events func(context.Context, int, any) ([]E, error),
) WorkerOps {
	return workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]{q, lists, translate, workers, events}
}

type workerOps[
	R ~workerRow[L], E WorkerEventRow, L any, N BatchSize,
	Get ~workerKeyParams, Alive ~workerAliveParams, Refresh ~workerRefreshParams[L], Register ~workerRegisterParams[L],
	Sweep ~workerSweepParams[N], Swept ~workerKeyParams, Append ~workerEventAppendParams, Prune ~workerEventPruneParams[N],
] struct {
	q         workerQueries[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]
	lists     Lists[L]
	translate func(error) error
	workers   func(context.Context, int, any) ([]R, error) // the lists of workers (Lister.On)
	events    func(context.Context, int, any) ([]E, error) // the lists of events
}

// worker maps a row (and the error of reading it) to a Worker.
func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) worker(r R, err error) (Worker, error) {
	if err != nil {
		return Worker{}, o.translate(err)
	}
	return WorkerFromRow(r, o.lists)
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerGet(ctx context.Context, k WorkerKey) (Worker, error) {
	return o.worker(o.q.WorkerGet(ctx, Get(k)))
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerGetAlive(ctx context.Context, k WorkerKey, nowMs int64) (Worker, error) {
	return o.worker(o.q.WorkerGetAlive(ctx, Alive{Namespace: k.Namespace, InstanceID: k.InstanceID, Now: nowMs}))
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerRefresh(ctx context.Context, w Worker) (int64, error) {
	at, err := o.q.WorkerRefresh(ctx, Refresh{
		Lanes: o.lists.Store(w.Lanes), Capabilities: o.lists.Store(w.Capabilities), Now: w.LastHeartbeatMs,
		TtlMs: w.TTLMs, Namespace: w.Namespace, InstanceID: w.InstanceID, WorkerID: w.WorkerID,
	})
	return at, o.translate(err)
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerRegister(ctx context.Context, w Worker) error {
	_, err := o.q.WorkerRegister(ctx, Register{
		Namespace: w.Namespace, InstanceID: w.InstanceID, WorkerID: w.WorkerID,
		Lanes: o.lists.Store(w.Lanes), Capabilities: o.lists.Store(w.Capabilities), Now: w.LastHeartbeatMs, TtlMs: w.TTLMs,
	})
	return o.translate(err)
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerSweepBatch(ctx context.Context, nowMs int64, batch int) ([]WorkerKey, error) {
	rows, err := o.q.WorkerSweepBatch(ctx, Sweep{Now: nowMs, BatchSize: N(batch)})
	return Rows(len(rows), err, o.translate, func(i int) WorkerKey { return WorkerKey(rows[i]) })
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerEventAppend(ctx context.Context, e WorkerEvent) error {
	return o.translate(o.q.WorkerEventAppend(ctx, Append{
		Namespace: e.Namespace, InstanceID: e.InstanceID, Kind: e.Kind, AtMs: e.AtMs, Reason: e.Reason,
	}))
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerEventPruneBatch(ctx context.Context, beforeMs int64, batch int) (int, error) {
	n, err := o.q.WorkerEventPruneBatch(ctx, Prune{BeforeMs: beforeMs, BatchSize: N(batch)})
	return int(n), o.translate(err)
}

type (
	agentStateParams[T NullText] = struct {
		State            string
		TerminalReason   T
		StateChangedAtMs int64
		ID, FromState    string
	}
	agentCheckpointParams[T NullText] = struct {
		CheckpointSessionID T
		CheckpointCursor    int64
		ID                  string
	}
	agentKeyParams[T NullText] = struct {
		OwnerActor     string
		IdempotencyKey T
	}
	agentSessionParams[T NullText] = struct {
		Provider          string
		ProviderSessionID T
	}
	agentHostParams[T NullText] = struct {
		AtMs int64
		Host T
	}
	agentHolderParams[T NullText] = struct {
		HolderNamespace, HolderInstanceID T
		ID                                string
	}
)

// agentQueries is what AgentOps use of an engine's generated queries.
type agentQueries[
	R ~agentRow[T, L], T NullText, L any, Insert, Spawn ~agentRow[T, L],
	State ~agentStateParams[T], Checkpoint ~agentCheckpointParams[T], Key ~agentKeyParams[T],
	Session ~agentSessionParams[T], Host ~agentHostParams[T], Holder ~agentHolderParams[T],
] interface {
	AgentInsert(context.Context, Insert) error
	AgentSpawn(context.Context, Spawn) (int64, error)
	AgentGet(context.Context, string) (R, error)
	AgentSetState(context.Context, State) (int64, error)
	AgentSetCheckpoint(context.Context, Checkpoint) (int64, error)
	AgentFindByIdempotencyKey(context.Context, Key) (R, error)
	AgentFindLiveByProviderSession(context.Context, Session) (R, error)
	AgentTerminateLive(context.Context, int64) (int64, error)
	AgentTerminateLiveOnHost(context.Context, Host) (int64, error)
	AgentSetHolder(context.Context, Holder) (int64, error)
}

// NewAgentOps returns AgentOps on an engine's generated queries q, which
// store lists as lists say, with the list operation of agents on q; every
// driver error passes through translate.
func NewAgentOps[
	R ~agentRow[T, L], T NullText, L any, Insert, Spawn ~agentRow[T, L],
	State ~agentStateParams[T], Checkpoint ~agentCheckpointParams[T], Key ~agentKeyParams[T],
	Session ~agentSessionParams[T], Host ~agentHostParams[T], Holder ~agentHolderParams[T],
](
	q agentQueries[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder],
	lists Lists[L], translate func(error) error, agents func(context.Context, int, any) ([]R, error),
) AgentOps {
	return agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]{q, lists, translate, agents}
}

type agentOps[
	R ~agentRow[T, L], T NullText, L any, Insert, Spawn ~agentRow[T, L],
	State ~agentStateParams[T], Checkpoint ~agentCheckpointParams[T], Key ~agentKeyParams[T],
	Session ~agentSessionParams[T], Host ~agentHostParams[T], Holder ~agentHolderParams[T],
] struct {
	q         agentQueries[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]
	lists     Lists[L]
	translate func(error) error
	agents    func(context.Context, int, any) ([]R, error) // the lists of agents (Lister.On)
}

// agent maps a row (and the error of reading it) to an Agent.
func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) agent(r R, err error) (Agent, error) {
	if err != nil {
		return Agent{}, o.translate(err)
	}
	return AgentFromRow(r, o.lists)
}

// changed is whether a write of n rows (and its error) changed one.
func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) changed(n int64, err error) (bool, error) {
	return n > 0, o.translate(err)
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentInsert(ctx context.Context, a Agent) error {
	return o.translate(o.q.AgentInsert(ctx, AgentParams[Insert](a, o.lists)))
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentSpawn(ctx context.Context, a Agent) (bool, error) {
	return o.changed(o.q.AgentSpawn(ctx, AgentParams[Spawn](a, o.lists)))
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentGet(ctx context.Context, id string) (Agent, error) {
	return o.agent(o.q.AgentGet(ctx, id))
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentSetState(ctx context.Context, id, fromState, state, reason string, atMs int64) (bool, error) {
	return o.changed(o.q.AgentSetState(ctx, State{
		State: state, TerminalReason: Text[T](reason), StateChangedAtMs: atMs, ID: id, FromState: fromState,
	}))
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentSetCheckpoint(ctx context.Context, id, sessionID string, cursor int64) (bool, error) {
	return o.changed(o.q.AgentSetCheckpoint(ctx, Checkpoint{CheckpointSessionID: Text[T](sessionID), CheckpointCursor: cursor, ID: id}))
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentFindByIdempotencyKey(ctx context.Context, ownerActor, key string) (Agent, error) {
	return o.agent(o.q.AgentFindByIdempotencyKey(ctx, Key{OwnerActor: ownerActor, IdempotencyKey: Text[T](key)}))
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentFindLiveByProviderSession(ctx context.Context, provider, sessionID string) (Agent, error) {
	return o.agent(o.q.AgentFindLiveByProviderSession(ctx, Session{Provider: provider, ProviderSessionID: Text[T](sessionID)}))
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentTerminateLive(ctx context.Context, atMs int64) (int, error) {
	n, err := o.q.AgentTerminateLive(ctx, atMs)
	return int(n), o.translate(err)
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentTerminateLiveOnHost(ctx context.Context, host string, atMs int64) (int, error) {
	n, err := o.q.AgentTerminateLiveOnHost(ctx, Host{AtMs: atMs, Host: Text[T](host)})
	return int(n), o.translate(err)
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentSetHolder(ctx context.Context, id, holderNamespace, holderInstanceID string) (bool, error) {
	return o.changed(o.q.AgentSetHolder(ctx, Holder{
		HolderNamespace: Text[T](holderNamespace), HolderInstanceID: Text[T](holderInstanceID), ID: id,
	}))
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerList(ctx context.Context, p WorkerListParams) ([]Worker, error) {
	rows, err := o.workers(ctx, int(p.Route()), p)
	return RowsErr(len(rows), err, o.translate, func(i int) (Worker, error) { return WorkerFromRow(rows[i], o.lists) })
}

func (o workerOps[R, E, L, N, Get, Alive, Refresh, Register, Sweep, Swept, Append, Prune]) WorkerEventList(ctx context.Context, p WorkerEventListParams) ([]WorkerEvent, error) {
	rows, err := o.events(ctx, int(p.Route()), p)
	return WorkerEvents(rows, err, o.translate)
}

func (o agentOps[R, T, L, Insert, Spawn, State, Checkpoint, Key, Session, Host, Holder]) AgentList(ctx context.Context, p AgentListParams) ([]Agent, error) {
	rows, err := o.agents(ctx, int(p.Route()), p)
	return RowsErr(len(rows), err, o.translate, func(i int) (Agent, error) { return AgentFromRow(rows[i], o.lists) })
}

// laneLimitQueries is what LaneLimitOps use of an engine's generated
// queries.
type laneLimitQueries[Put, Row ~laneLimitsRow[F], F Flag] interface {
	LaneLimitsPut(context.Context, Put) error
	LaneLimitsList(context.Context, string) ([]Row, error)
}

// NewLaneLimitOps returns LaneLimitOps on an engine's generated queries q;
// every driver error passes through translate.
func NewLaneLimitOps[Put, Row ~laneLimitsRow[F], F Flag](q laneLimitQueries[Put, Row, F], translate func(error) error) LaneLimitOps {
	return laneLimitOps[Put, Row, F]{q, translate}
}

type laneLimitOps[Put, Row ~laneLimitsRow[F], F Flag] struct {
	q         laneLimitQueries[Put, Row, F]
	translate func(error) error
}

func (o laneLimitOps[Put, Row, F]) LaneLimitsPut(ctx context.Context, l LaneLimits) error {
	return o.translate(o.q.LaneLimitsPut(ctx, Put{
		Namespace: l.Namespace, Lane: l.Lane, MaxRunning: l.MaxRunning, MaxRunningPerGroup: l.MaxPerGroup,
		Rate: l.Rate, RatePeriodMs: l.RatePeriodMs, Paused: flagFor[F](l.Paused),
	}))
}

func (o laneLimitOps[Put, Row, F]) LaneLimitsList(ctx context.Context, namespace string) ([]LaneLimits, error) {
	rows, err := o.q.LaneLimitsList(ctx, namespace)
	return Rows(len(rows), err, o.translate, func(i int) LaneLimits {
		r := laneLimitsRow[F](rows[i])
		return LaneLimits{
			Namespace: r.Namespace, Lane: r.Lane, MaxRunning: r.MaxRunning, MaxPerGroup: r.MaxRunningPerGroup,
			Rate: r.Rate, RatePeriodMs: r.RatePeriodMs, Paused: flagOf(r.Paused),
		}
	})
}

type (
	schedulePutParams[T NullText, I NullInt, L any] = struct {
		Namespace, Name             string
		EveryMs                     I
		Cron                        T
		Lane                        string
		Priority                    int64
		RequiredCapabilities        L
		MaxAttempts, RetryBackoffMs int64
		Paused                      bool
		NextRunAtMs, UpdatedAtMs    int64
		Payload                     []byte
		TimeoutMs                   int64
	}
	scheduleKeyParams      = struct{ Namespace, Name string }
	scheduleListRow[R any] = struct {
		Schedule  R
		LastState string
	}
	scheduleDueParams[N BatchSize] = struct {
		Now, AfterMs              int64
		AfterNamespace, AfterName string
		MaxRows                   N
	}
	scheduleAdvanceParams = struct {
		NextRunAtMs     int64
		LastExecutionID uuid.NullUUID
		Namespace, Name string
		FromMs          int64
	}
)

// scheduleQueries is what ScheduleOps use of an engine's generated queries.
type scheduleQueries[
	R ~scheduleRow[T, I, L], T NullText, I NullInt, L any, N BatchSize,
	Put ~schedulePutParams[T, I, L], Key ~scheduleKeyParams, Listed ~scheduleListRow[R], Due ~scheduleDueParams[N], Advance ~scheduleAdvanceParams,
] interface {
	SchedulePut(context.Context, Put) error
	ScheduleDelete(context.Context, Key) (int64, error)
	ScheduleList(context.Context, string) ([]Listed, error)
	ScheduleListDue(context.Context, Due) ([]R, error)
	ScheduleAdvance(context.Context, Advance) (int64, error)
}

// NewScheduleOps returns ScheduleOps on an engine's generated queries q,
// which store lists as lists say; every driver error passes through
// translate.
func NewScheduleOps[
	R ~scheduleRow[T, I, L], T NullText, I NullInt, L any, N BatchSize,
	Put ~schedulePutParams[T, I, L], Key ~scheduleKeyParams, Listed ~scheduleListRow[R], Due ~scheduleDueParams[N], Advance ~scheduleAdvanceParams,
](q scheduleQueries[R, T, I, L, N, Put, Key, Listed, Due, Advance], lists Lists[L], translate func(error) error) ScheduleOps {
	return scheduleOps[R, T, I, L, N, Put, Key, Listed, Due, Advance]{q, lists, translate}
}

type scheduleOps[
	R ~scheduleRow[T, I, L], T NullText, I NullInt, L any, N BatchSize,
	Put ~schedulePutParams[T, I, L], Key ~scheduleKeyParams, Listed ~scheduleListRow[R], Due ~scheduleDueParams[N], Advance ~scheduleAdvanceParams,
] struct {
	q         scheduleQueries[R, T, I, L, N, Put, Key, Listed, Due, Advance]
	lists     Lists[L]
	translate func(error) error
}

func (o scheduleOps[R, T, I, L, N, Put, Key, Listed, Due, Advance]) SchedulePut(ctx context.Context, s Schedule) error {
	return o.translate(o.q.SchedulePut(ctx, Put{
		Namespace: s.Namespace, Name: s.Name, EveryMs: I{Int64: s.EveryMs, Valid: s.EveryMs != 0},
		Cron: Text[T](s.Cron), Lane: s.Lane, Priority: s.Priority, RequiredCapabilities: o.lists.Store(s.RequiredCapabilities),
		MaxAttempts: s.MaxAttempts, RetryBackoffMs: s.RetryBackoffMs, Paused: s.Paused, NextRunAtMs: s.NextRunAtMs,
		UpdatedAtMs: s.UpdatedAtMs, Payload: NonNilBytes(s.Payload), TimeoutMs: s.TimeoutMs,
	}))
}

func (o scheduleOps[R, T, I, L, N, Put, Key, Listed, Due, Advance]) ScheduleDelete(ctx context.Context, namespace, name string) (bool, error) {
	n, err := o.q.ScheduleDelete(ctx, Key{Namespace: namespace, Name: name})
	return n > 0, o.translate(err)
}

func (o scheduleOps[R, T, I, L, N, Put, Key, Listed, Due, Advance]) ScheduleList(ctx context.Context, namespace string) ([]Schedule, error) {
	rows, err := o.q.ScheduleList(ctx, namespace)
	return RowsErr(len(rows), err, o.translate, func(i int) (Schedule, error) {
		r := scheduleListRow[R](rows[i])
		s, err := ScheduleFromRow(r.Schedule, o.lists)
		s.LastState = r.LastState
		return s, err
	})
}

func (o scheduleOps[R, T, I, L, N, Put, Key, Listed, Due, Advance]) ScheduleListDue(ctx context.Context, nowMs int64, after Schedule, max int) ([]Schedule, error) {
	rows, err := o.q.ScheduleListDue(ctx, Due{
		Now: nowMs, AfterMs: after.NextRunAtMs, AfterNamespace: after.Namespace, AfterName: after.Name, MaxRows: N(max),
	})
	return RowsErr(len(rows), err, o.translate, func(i int) (Schedule, error) { return ScheduleFromRow(rows[i], o.lists) })
}

func (o scheduleOps[R, T, I, L, N, Put, Key, Listed, Due, Advance]) ScheduleAdvance(ctx context.Context, namespace, name string, fromMs, nextMs int64, runID uuid.UUID) (bool, error) {
	n, err := o.q.ScheduleAdvance(ctx, Advance{
		NextRunAtMs: nextMs, LastExecutionID: uuid.NullUUID{UUID: runID, Valid: runID != uuid.Nil},
		Namespace: namespace, Name: name, FromMs: fromMs,
	})
	return n == 1, o.translate(err)
}

type (
	leaderResignParams = struct {
		Now          int64
		Name, Holder string
		Epoch        int64
	}
	leaderRow = struct {
		Holder             string
		Epoch, ExpiresAtMs int64
	}
	leaderHoldsParams = struct {
		Name, Holder string
		Epoch        int64
	}
)

// leaderQueries is what LeaderOps use of an engine's generated queries.
type leaderQueries[Resign ~leaderResignParams, Row ~leaderRow, Holds ~leaderHoldsParams] interface {
	LeaderResign(context.Context, Resign) error
	LeaderGet(context.Context, string) (Row, error)
	LeaderHolds(context.Context, Holds) (int64, error)
}

// NewLeaderOps returns LeaderOps on an engine's generated queries q; every
// driver error passes through translate.
func NewLeaderOps[Resign ~leaderResignParams, Row ~leaderRow, Holds ~leaderHoldsParams](q leaderQueries[Resign, Row, Holds], translate func(error) error) LeaderOps {
	return leaderOps[Resign, Row, Holds]{q, translate}
}

type leaderOps[Resign ~leaderResignParams, Row ~leaderRow, Holds ~leaderHoldsParams] struct {
	q         leaderQueries[Resign, Row, Holds]
	translate func(error) error
}

func (o leaderOps[Resign, Row, Holds]) LeaderResign(ctx context.Context, name, holder string, epoch, nowMs int64) error {
	return o.translate(o.q.LeaderResign(ctx, Resign{Now: nowMs, Name: name, Holder: holder, Epoch: epoch}))
}

func (o leaderOps[Resign, Row, Holds]) LeaderGet(ctx context.Context, name string) (string, int64, int64, error) {
	r, err := o.q.LeaderGet(ctx, name)
	return leaderRow(r).Holder, leaderRow(r).Epoch, leaderRow(r).ExpiresAtMs, o.translate(err)
}

func (o leaderOps[Resign, Row, Holds]) LeaderHolds(ctx context.Context, name, holder string, epoch int64) (bool, error) {
	n, err := o.q.LeaderHolds(ctx, Holds{Name: name, Holder: holder, Epoch: epoch})
	return n > 0, o.translate(err)
}
