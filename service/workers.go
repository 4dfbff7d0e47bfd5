package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rosterdb/roster/db"
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
	Reason                string
}

// ListWorkerEventsArgs select events with Seq > AfterSeq, optionally of one
// namespace and one instance, in Seq order.
type ListWorkerEventsArgs struct {
	Namespace, InstanceID string
	AfterSeq              int64
	Limit                 int
}

// sweepBatchSize bounds the rows one sweep, reclaim or prune transaction
// touches, so the writer is never held for long.
const sweepBatchSize = 256

// RegisterWorker registers an instance, or refreshes it while it is alive
// under the same worker id. An instance alive under another worker id is
// ErrConflict.
func (s *Store) RegisterWorker(ctx context.Context, a RegisterWorkerArgs) (RegisterOutcome, error) {
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
	now := s.now(a.Now).UnixMilli()
	var outcome RegisterOutcome
	err = s.write(ctx, func(ctx context.Context, q *db.Queries) error {
		outcome = Registered
		registeredAt := now
		row, err := q.WorkerGet(ctx, db.WorkerGetParams{Namespace: a.Namespace, InstanceID: a.InstanceID})
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case now < row.LastHeartbeatMs+row.TtlMs: // alive
			if row.WorkerID != a.WorkerID {
				return fmt.Errorf("%w: instance %q in namespace %q is alive under worker id %q",
					ErrConflict, a.InstanceID, a.Namespace, row.WorkerID)
			}
			outcome, registeredAt = Refreshed, row.RegisteredAtMs
		}
		if err := q.WorkerUpsert(ctx, db.WorkerUpsertParams{
			Namespace:       a.Namespace,
			InstanceID:      a.InstanceID,
			WorkerID:        a.WorkerID,
			Lanes:           jsonArray(lanes),
			Capabilities:    jsonArray(caps),
			LastHeartbeatMs: now,
			TtlMs:           a.TTL.Milliseconds(),
			RegisteredAtMs:  registeredAt,
		}); err != nil {
			return err
		}
		return appendEvent(ctx, q, a.Namespace, a.InstanceID, EventRegistered, now, "")
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
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return time.Time{}, err
	}
	now := s.now(a.Now).UnixMilli()
	var ttl int64
	err := s.write(ctx, func(ctx context.Context, q *db.Queries) error {
		var err error
		ttl, err = q.WorkerHeartbeat(ctx, db.WorkerHeartbeatParams{
			Now: now, Namespace: a.Namespace, InstanceID: a.InstanceID,
		})
		if errors.Is(err, sql.ErrNoRows) {
			return notRegistered(a.Namespace, a.InstanceID)
		}
		if err != nil {
			return err
		}
		return appendEvent(ctx, q, a.Namespace, a.InstanceID, EventHeartbeat, now, "")
	})
	if err != nil {
		return time.Time{}, err
	}
	return msTime(now + ttl), nil
}

// MarkWorkerDead removes an instance (alive or lapsed), logs why, and expires
// every running lease it holds at now. An absent instance is ErrNotRegistered.
func (s *Store) MarkWorkerDead(ctx context.Context, a MarkWorkerDeadArgs) error {
	if err := validWorkerKey(a.Namespace, a.InstanceID); err != nil {
		return err
	}
	if err := validText("Reason", a.Reason, maxReasonBytes); err != nil {
		return err
	}
	now := s.now(a.Now).UnixMilli()
	return s.write(ctx, func(ctx context.Context, q *db.Queries) error {
		n, err := q.WorkerDelete(ctx, db.WorkerDeleteParams{Namespace: a.Namespace, InstanceID: a.InstanceID})
		if err != nil {
			return err
		}
		if n == 0 {
			return notRegistered(a.Namespace, a.InstanceID)
		}
		if err := appendEvent(ctx, q, a.Namespace, a.InstanceID, EventMarkedDead, now, a.Reason); err != nil {
			return err
		}
		return q.AttemptExpireHeldBy(ctx, db.AttemptExpireHeldByParams{
			Now: now, Namespace: a.Namespace, InstanceID: a.InstanceID,
		})
	})
}

// GetWorker returns one worker, alive or lapsed but not yet swept (compare
// ExpiresAt). An absent instance is ErrNotRegistered.
func (s *Store) GetWorker(ctx context.Context, namespace, instanceID string) (Worker, error) {
	if err := validWorkerKey(namespace, instanceID); err != nil {
		return Worker{}, err
	}
	var w Worker
	err := s.read(ctx, func(q *db.Queries) error {
		row, err := q.WorkerGet(ctx, db.WorkerGetParams{Namespace: namespace, InstanceID: instanceID})
		if errors.Is(err, sql.ErrNoRows) {
			return notRegistered(namespace, instanceID)
		}
		if err != nil {
			return err
		}
		w, err = workerFromRow(row)
		return err
	})
	return w, err
}

const workersCursor = "workers"

// ListWorkers pages workers in (namespace, instance id) order, of one
// namespace or of all.
func (s *Store) ListWorkers(ctx context.Context, a ListWorkersArgs) (WorkerPage, error) {
	if a.Namespace != "" {
		if err := validIdentifier("Namespace", a.Namespace); err != nil {
			return WorkerPage{}, err
		}
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return WorkerPage{}, err
	}
	var afterNS, afterInst string
	if _, err := decodeCursor(a.After, workersCursor, &afterNS, &afterInst); err != nil {
		return WorkerPage{}, err
	}
	if a.After != "" && a.Namespace != "" && afterNS != a.Namespace {
		return WorkerPage{}, invalid("After", "cursor belongs to another namespace")
	}
	var rows []db.Worker
	err = s.read(ctx, func(q *db.Queries) error {
		var err error
		if a.Namespace != "" {
			rows, err = q.WorkerListByNamespace(ctx, db.WorkerListByNamespaceParams{
				Namespace: a.Namespace, AfterInstanceID: afterInst, Limit: int64(limit) + 1,
			})
		} else {
			rows, err = q.WorkerListAll(ctx, db.WorkerListAllParams{
				AfterNamespace: afterNS, AfterInstanceID: afterInst, Limit: int64(limit) + 1,
			})
		}
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
		if page.Workers[i], err = workerFromRow(r); err != nil {
			return WorkerPage{}, err
		}
	}
	return page, nil
}

// SweepExpiredWorkers deletes every worker with LastHeartbeat + TTL <= now,
// logs a ttl_swept event for each, expires their running leases at now, and
// returns how many it swept. It works in bounded batches, one transaction
// each, so that it never holds the writer for long.
func (s *Store) SweepExpiredWorkers(ctx context.Context, now time.Time) (int, error) {
	nowMs := s.now(now).UnixMilli()
	total := 0
	for {
		var n int
		err := s.write(ctx, func(ctx context.Context, q *db.Queries) error {
			rows, err := q.WorkerSweepBatch(ctx, db.WorkerSweepBatchParams{Now: nowMs, BatchSize: sweepBatchSize})
			if err != nil || len(rows) == 0 {
				return err
			}
			n = len(rows)
			pairs := make([][2]string, len(rows))
			for i, r := range rows {
				pairs[i] = [2]string{r.Namespace, r.InstanceID}
			}
			instances := mustJSON(pairs)
			if err := q.WorkerEventAppendSwept(ctx, db.WorkerEventAppendSweptParams{AtMs: nowMs, Instances: instances}); err != nil {
				return err
			}
			return q.AttemptExpireHeldByMany(ctx, db.AttemptExpireHeldByManyParams{Now: nowMs, Instances: instances})
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < sweepBatchSize {
			if total > 0 {
				s.log.Info("roster: swept expired workers", "count", total)
			}
			return total, nil
		}
	}
}

// ListWorkerEvents reads the audit log in Seq order: events with Seq >
// AfterSeq, optionally of one namespace and one instance.
func (s *Store) ListWorkerEvents(ctx context.Context, a ListWorkerEventsArgs) ([]WorkerEvent, error) {
	if a.Namespace != "" {
		if err := validIdentifier("Namespace", a.Namespace); err != nil {
			return nil, err
		}
	}
	if a.InstanceID != "" {
		if err := validIdentifier("InstanceID", a.InstanceID); err != nil {
			return nil, err
		}
	}
	if a.AfterSeq < 0 {
		return nil, invalid("AfterSeq", "%d is negative", a.AfterSeq)
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return nil, err
	}
	var rows []db.WorkerEvent
	err = s.read(ctx, func(q *db.Queries) error {
		var err error
		switch {
		case a.InstanceID != "":
			rows, err = q.WorkerEventListByInstance(ctx, db.WorkerEventListByInstanceParams{
				InstanceID: a.InstanceID, Namespace: a.Namespace, AfterSeq: a.AfterSeq, Limit: int64(limit),
			})
		case a.Namespace != "":
			rows, err = q.WorkerEventListByNamespace(ctx, db.WorkerEventListByNamespaceParams{
				Namespace: a.Namespace, AfterSeq: a.AfterSeq, Limit: int64(limit),
			})
		default:
			rows, err = q.WorkerEventList(ctx, db.WorkerEventListParams{AfterSeq: a.AfterSeq, Limit: int64(limit)})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	events := make([]WorkerEvent, len(rows))
	for i, r := range rows {
		events[i] = WorkerEvent{
			Seq:        r.Seq,
			Namespace:  r.Namespace,
			InstanceID: r.InstanceID,
			Kind:       WorkerEventKind(r.Kind),
			At:         msTime(r.AtMs),
			Reason:     r.Reason,
		}
	}
	return events, nil
}

// PruneWorkerEvents deletes the events with At < before, in bounded batches,
// and returns how many it deleted.
func (s *Store) PruneWorkerEvents(ctx context.Context, before time.Time) (int, error) {
	beforeMs := s.now(before).UnixMilli()
	total := 0
	for {
		var n int64
		err := s.write(ctx, func(ctx context.Context, q *db.Queries) error {
			var err error
			n, err = q.WorkerEventPruneBatch(ctx, db.WorkerEventPruneBatchParams{BeforeMs: beforeMs, BatchSize: sweepBatchSize})
			return err
		})
		total += int(n)
		if err != nil || n < sweepBatchSize {
			return total, err
		}
	}
}

func appendEvent(ctx context.Context, q *db.Queries, namespace, instanceID string, kind WorkerEventKind, atMs int64, reason string) error {
	return q.WorkerEventAppend(ctx, db.WorkerEventAppendParams{
		Namespace: namespace, InstanceID: instanceID, Kind: string(kind), AtMs: atMs, Reason: reason,
	})
}

func validWorkerKey(namespace, instanceID string) error {
	if err := validIdentifier("Namespace", namespace); err != nil {
		return err
	}
	return validIdentifier("InstanceID", instanceID)
}

func notRegistered(namespace, instanceID string) error {
	return fmt.Errorf("%w: instance %q in namespace %q", ErrNotRegistered, instanceID, namespace)
}

func workerFromRow(r db.Worker) (Worker, error) {
	lanes, err := parseJSONArray(r.Lanes)
	if err != nil {
		return Worker{}, err
	}
	caps, err := parseJSONArray(r.Capabilities)
	if err != nil {
		return Worker{}, err
	}
	return Worker{
		Namespace:     r.Namespace,
		InstanceID:    r.InstanceID,
		WorkerID:      r.WorkerID,
		Lanes:         lanes,
		Capabilities:  caps,
		LastHeartbeat: msTime(r.LastHeartbeatMs),
		TTL:           time.Duration(r.TtlMs) * time.Millisecond,
		RegisteredAt:  msTime(r.RegisteredAtMs),
	}, nil
}

// msTime converts Unix milliseconds to a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// jsonArray encodes a string list as a JSON array ("[]" when empty).
func jsonArray(vs []string) string {
	if len(vs) == 0 {
		return "[]"
	}
	return mustJSON(vs)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("roster: encoding JSON: " + err.Error()) // only strings are encoded
	}
	return string(b)
}

// parseJSONArray decodes a stored JSON array of strings (nil when empty).
func parseJSONArray(s string) ([]string, error) {
	var vs []string
	if err := json.Unmarshal([]byte(s), &vs); err != nil {
		return nil, fmt.Errorf("roster: corrupt JSON array %q: %w", s, err)
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return vs, nil
}
