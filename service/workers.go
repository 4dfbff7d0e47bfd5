package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

// RegisterWorkerArgs are the arguments of RegisterWorker.
type RegisterWorkerArgs struct {
	Namespace, WorkerID, InstanceID string
	Lanes, Capabilities             []string
	TTL                             time.Duration
	Now                             time.Time
}

// RegisterOutcome tells whether RegisterWorker created or refreshed a worker.
type RegisterOutcome int

const (
	// Registered: the instance was absent (or its TTL had lapsed) and is now
	// registered, with RegisteredAt = now.
	Registered RegisterOutcome = iota + 1
	// Refreshed: the instance was alive; its fields were replaced and its
	// RegisteredAt kept.
	Refreshed
)

// String returns "registered" or "refreshed".
func (o RegisterOutcome) String() string {
	switch o {
	case Registered:
		return "registered"
	case Refreshed:
		return "refreshed"
	}
	return fmt.Sprintf("RegisterOutcome(%d)", int(o))
}

// HeartbeatWorkerArgs are the arguments of HeartbeatWorker.
type HeartbeatWorkerArgs struct {
	Namespace, InstanceID string
	Now                   time.Time
}

// MarkWorkerDeadArgs are the arguments of MarkWorkerDead.
type MarkWorkerDeadArgs struct {
	Namespace, InstanceID, Reason string
	Now                           time.Time
}

// ListWorkersArgs select a page of workers. Namespace "" lists every
// namespace.
type ListWorkersArgs struct {
	Namespace, After string
	Limit            int
}

// WorkerPage is one page of workers; Next is empty exactly on the last page.
type WorkerPage struct {
	Workers []Worker
	Next    string
}

// Worker is one registered worker instance.
type Worker struct {
	Namespace, InstanceID, WorkerID string
	Lanes, Capabilities             []string // sorted, without duplicates; nil when empty
	LastHeartbeat                   time.Time
	TTL                             time.Duration
	RegisteredAt                    time.Time
}

// ExpiresAt returns LastHeartbeat + TTL: the worker is alive strictly before it.
func (w Worker) ExpiresAt() time.Time { return w.LastHeartbeat.Add(w.TTL) }

// WorkerEventKind names an audit-log event.
type WorkerEventKind string

// The kinds of worker events.
const (
	EventRegistered WorkerEventKind = "registered"
	EventHeartbeat  WorkerEventKind = "heartbeat"
	EventMarkedDead WorkerEventKind = "marked_dead"
	EventTTLSwept   WorkerEventKind = "ttl_swept"
)

// WorkerEvent is one entry of the worker audit log.
type WorkerEvent struct {
	Seq                   int64 // increases with every event
	Namespace, InstanceID string
	Kind                  WorkerEventKind
	At                    time.Time
	// Reason is a mark-dead's reason, and RefreshedReason on the registered
	// event of a register that found the instance alive (a refresh, not a
	// new registration, which has none).
	Reason string
}

// RefreshedReason is the Reason of the registered event a refresh appends:
// the audit log tells a refresh of a live registration from a new one.
const RefreshedReason = "refreshed"

// ListWorkerEventsArgs select events with Seq > AfterSeq, optionally of one
// namespace and one instance, in Seq order.
type ListWorkerEventsArgs struct {
	Namespace, InstanceID string
	AfterSeq              int64
	Limit                 int
}

// RegisterWorker registers an instance, or refreshes it while it is alive
// under the same worker id. An instance alive under another worker id is
// ErrConflict.
func (s *Store) RegisterWorker(ctx context.Context, a RegisterWorkerArgs) (RegisterOutcome, error) {
	if err := s.notClosed(); err != nil {
		return 0, err
	}
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return 0, err
	}
	if err := validIdentifier("WorkerID", a.WorkerID); err != nil {
		return 0, err
	}
	lanes, err := identifierSet("Lanes", a.Lanes)
	if err != nil {
		return 0, err
	}
	caps, err := identifierSet("Capabilities", a.Capabilities)
	if err != nil {
		return 0, err
	}
	if err := validTTL("TTL", a.TTL); err != nil {
		return 0, err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return 0, err
	}
	w := engine.Worker{
		Namespace: a.Namespace, InstanceID: a.InstanceID, WorkerID: a.WorkerID,
		Lanes: lanes, Capabilities: caps, LastHeartbeatMs: now, TTLMs: a.TTL.Milliseconds(),
	}
	key := engine.WorkerKey{Namespace: a.Namespace, InstanceID: a.InstanceID}
	var outcome RegisterOutcome
	err = s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		// Each step checks liveness and ownership in the statement that
		// writes: refresh an alive row of this worker id, else take the key
		// if it is free or lapsed, else it is alive under another worker id.
		// Where writers run concurrently, a register of the same instance
		// can slip between two steps; the loop then tries again.
		for try := 1; ; try++ {
			_, err := q.WorkerRefresh(ctx, w)
			if err == nil {
				outcome = Refreshed
				break
			}
			if !errors.Is(err, engine.ErrNoRows) {
				return err
			}
			// A lapsed row is taken over: its bound leases end with it.
			if err := q.LeaseRevokeBoundOfLapsed(ctx, key, now); err != nil {
				return err
			}
			err = q.WorkerRegister(ctx, w)
			if err == nil {
				outcome = Registered
				break
			}
			if !errors.Is(err, engine.ErrNoRows) {
				return err
			}
			holder, err := q.WorkerGetAlive(ctx, key, now)
			if err != nil && !errors.Is(err, engine.ErrNoRows) {
				return err
			}
			if (err == nil && holder.WorkerID != a.WorkerID) || try == 3 {
				return fmt.Errorf("%w: instance %q in namespace %q is alive under worker id %q",
					ErrConflict, a.InstanceID, a.Namespace, holder.WorkerID)
			}
		}
		reason := "" // a new registration
		if outcome == Refreshed {
			reason = RefreshedReason
		}
		return appendEvent(ctx, q, key, EventRegistered, now, reason)
	})
	if err != nil {
		return 0, err
	}
	return outcome, nil
}

// HeartbeatWorker keeps an alive instance alive: LastHeartbeat becomes now, and
// the new expiry (now + TTL) is returned. An absent or lapsed instance is
// ErrNotRegistered.
func (s *Store) HeartbeatWorker(ctx context.Context, a HeartbeatWorkerArgs) (time.Time, error) {
	if err := s.notClosed(); err != nil {
		return time.Time{}, err
	}
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return time.Time{}, err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return time.Time{}, err
	}
	key := engine.WorkerKey{Namespace: a.Namespace, InstanceID: a.InstanceID}
	var ttl int64
	err = s.writeOne(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		ttl, err = q.WorkerHeartbeat(ctx, key, now, s.cfg.heartbeatLog)
		if errors.Is(err, engine.ErrNoRows) {
			return notRegistered(key)
		}
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	return msTime(now + ttl), nil
}

// MarkWorkerDead removes an instance (alive or lapsed), logs why, and ends
// every running lease it holds at now, for good, and every live agent it
// holds (terminal, reason abandoned, at now). An absent instance is
// ErrNotRegistered.
func (s *Store) MarkWorkerDead(ctx context.Context, a MarkWorkerDeadArgs) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return err
	}
	if err := validText("Reason", a.Reason, maxReasonBytes); err != nil {
		return err
	}
	now, err := s.at("Now", a.Now)
	if err != nil {
		return err
	}
	key := engine.WorkerKey{Namespace: a.Namespace, InstanceID: a.InstanceID}
	defer s.lost.signal() // its handlers, if they run here, stop at once
	return s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		found, err := q.WorkerDelete(ctx, key)
		if err != nil {
			return err
		}
		if !found {
			return notRegistered(key)
		}
		if err := appendEvent(ctx, q, key, EventMarkedDead, now, a.Reason); err != nil {
			return err
		}
		if err := q.LeaseRevokeHeldBy(ctx, []engine.WorkerKey{key}, now); err != nil {
			return err
		}
		return abandonHeldAgents(ctx, q, []engine.WorkerKey{key}, now)
	})
}

// GetWorker returns one worker, alive or lapsed but not yet swept (compare
// ExpiresAt). An absent instance is ErrNotRegistered.
func (s *Store) GetWorker(ctx context.Context, namespace, instanceID string) (Worker, error) {
	if err := s.notClosed(); err != nil {
		return Worker{}, err
	}
	if err := validWorkerKey(namespace, instanceID); err != nil {
		return Worker{}, err
	}
	key := engine.WorkerKey{Namespace: namespace, InstanceID: instanceID}
	var w Worker
	err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		row, err := q.WorkerGet(ctx, key)
		if errors.Is(err, engine.ErrNoRows) {
			return notRegistered(key)
		}
		w = workerFromRow(row)
		return err
	})
	return w, err
}

const workersCursor = "workers"

// ListWorkers pages workers in (namespace, instance id) order, of one
// namespace or of all.
func (s *Store) ListWorkers(ctx context.Context, a ListWorkersArgs) (WorkerPage, error) {
	if err := s.notClosed(); err != nil {
		return WorkerPage{}, err
	}
	if err := validOptionalIdentifier("Namespace", a.Namespace); err != nil {
		return WorkerPage{}, err
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return WorkerPage{}, err
	}
	p := engine.WorkerListParams{Namespace: a.Namespace, Limit: limit + 1}
	if _, err := decodeCursor(a.After, workersCursor, &p.AfterNamespace, &p.AfterInstanceID); err != nil {
		return WorkerPage{}, err
	}
	if a.After != "" && a.Namespace != "" && p.AfterNamespace != a.Namespace {
		return WorkerPage{}, invalid("After", "cursor belongs to another namespace")
	}
	var rows []engine.Worker
	err = s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		rows, err = q.WorkerList(ctx, p)
		return err
	})
	if err != nil {
		return WorkerPage{}, err
	}
	var page WorkerPage
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.Next = encodeCursor(workersCursor, last.Namespace, last.InstanceID)
	}
	page.Workers = make([]Worker, len(rows))
	for i, r := range rows {
		page.Workers[i] = workerFromRow(r)
	}
	return page, nil
}

// ListWorkerEvents reads the audit log in Seq order: events with Seq >
// AfterSeq, optionally of one namespace and one instance.
func (s *Store) ListWorkerEvents(ctx context.Context, a ListWorkerEventsArgs) ([]WorkerEvent, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	if err := validOptionalIdentifier("Namespace", a.Namespace); err != nil {
		return nil, err
	}
	if err := validOptionalIdentifier("InstanceID", a.InstanceID); err != nil {
		return nil, err
	}
	if a.AfterSeq < 0 {
		return nil, invalid("AfterSeq", "%d is negative", a.AfterSeq)
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return nil, err
	}
	var rows []engine.WorkerEvent
	err = s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		rows, err = q.WorkerEventList(ctx, engine.WorkerEventListParams{
			Namespace: a.Namespace, InstanceID: a.InstanceID, AfterSeq: a.AfterSeq, Limit: limit,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	events := make([]WorkerEvent, len(rows))
	for i, r := range rows {
		events[i] = eventFromRow(r)
	}
	return events, nil
}

// LatestWorkerEvents reads the newest limit events (Limit rules as for
// lists), newest first, of one namespace ("" = every namespace): the tail a
// status page shows.
func (s *Store) LatestWorkerEvents(ctx context.Context, namespace string, limit int) ([]WorkerEvent, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	if err := validOptionalIdentifier("Namespace", namespace); err != nil {
		return nil, err
	}
	n, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	var rows []engine.WorkerEvent
	err = s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		rows, err = q.WorkerEventLatest(ctx, namespace, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	events := make([]WorkerEvent, len(rows))
	for i, r := range rows {
		events[i] = eventFromRow(r)
	}
	return events, nil
}

func appendEvent(ctx context.Context, q engine.Queries, k engine.WorkerKey, kind WorkerEventKind, atMs int64, reason string) error {
	return q.WorkerEventAppend(ctx, engine.WorkerEvent{
		Namespace: k.Namespace, InstanceID: k.InstanceID, Kind: string(kind), AtMs: atMs, Reason: reason,
	})
}

func validWorkerKey(namespace, instanceID string) error {
	if err := validIdentifier("Namespace", namespace); err != nil {
		return err
	}
	return validIdentifier("InstanceID", instanceID)
}

func notRegistered(k engine.WorkerKey) error {
	return fmt.Errorf("%w: instance %q in namespace %q", ErrNotRegistered, k.InstanceID, k.Namespace)
}

func workerFromRow(r engine.Worker) Worker {
	return Worker{
		Namespace:     r.Namespace,
		InstanceID:    r.InstanceID,
		WorkerID:      r.WorkerID,
		Lanes:         r.Lanes,
		Capabilities:  r.Capabilities,
		LastHeartbeat: msTime(r.LastHeartbeatMs),
		TTL:           time.Duration(r.TTLMs) * time.Millisecond,
		RegisteredAt:  msTime(r.RegisteredAtMs),
	}
}

// msTime converts Unix milliseconds to a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func eventFromRow(r engine.WorkerEvent) WorkerEvent {
	return WorkerEvent{
		Seq:        r.Seq,
		Namespace:  r.Namespace,
		InstanceID: r.InstanceID,
		Kind:       WorkerEventKind(r.Kind),
		At:         msTime(r.AtMs),
		Reason:     r.Reason,
	}
}
