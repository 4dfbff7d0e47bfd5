package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgdb "github.com/rosterdb/roster/db/postgres"
	"github.com/rosterdb/roster/internal/engine"
)

// Settle sends the outcomes (the completions in one statement, each failure
// and each snooze in one) and the claim in one pipeline: one round trip, one transaction,
// one commit. Each lease is fenced in its own statement's WHERE, so a lost
// lease writes nothing and affects nothing else. Should a statement fail
// for a reason of its own (not the connection's, not the server's), the
// transaction is rolled back and each outcome, then the claim, is written
// alone, so that one bad outcome fails no other.
func (e *Engine) Settle(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	if len(outcomes) == 0 && claim != nil {
		res := engine.SettleResult{}
		res.Claim, res.ClaimErr = e.ExecutionClaim(ctx, *claim)
		return res
	}
	var res engine.SettleResult
	err := e.onConn(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		var err error
		res, err = e.pipeline(ctx, conn, nowMs, outcomes, claim)
		return err
	})
	switch {
	case err == nil:
		if claim != nil && (res.ClaimErr == errDue || res.ClaimErr == errFlow) {
			// Due scheduled work waits to be made ready, or a lane's limits
			// or groups are to be read under its lock: claim alone, which
			// does either.
			res.Claim, res.ClaimErr = e.ExecutionClaim(ctx, *claim)
		}
		return res
	case engine.Transient(err) || errors.Is(err, engine.ErrClosed) || errors.Is(err, context.Canceled):
		res = engine.SettleResult{Errs: make([]error, len(outcomes)), ClaimErr: err}
		for i := range res.Errs {
			res.Errs[i] = err
		}
		return res
	}
	return e.settleApart(ctx, nowMs, outcomes, claim)
}

// lockWorkers returns the statement a settle starts with: the worker lock,
// shared, of the workers holding its leases (the lock order of
// queries/postgres/executions.sql). With a claim, the outcomes are the
// claiming worker's own leases (RunWorker settles its own), and its lock
// is taken by key; without one, the holders are looked up.
func (e *Engine) lockWorkers(outcomes []engine.Outcome, claim *engine.ClaimParams) func(ctx context.Context, q *pgdb.Queries) error {
	if claim != nil {
		p := pgdb.WorkerLockSharedParams{Namespace: claim.Namespace, InstanceID: claim.InstanceID}
		return func(ctx context.Context, q *pgdb.Queries) error { return q.WorkerLockShared(ctx, p) }
	}
	ids := make([]uuid.UUID, len(outcomes))
	for i, o := range outcomes {
		ids[i] = o.Lease.ExecutionID
	}
	return func(ctx context.Context, q *pgdb.Queries) error { return q.LeaseLockHolders(ctx, ids) }
}

// flowWorker tells whether the claim is of a worker whose last claim was a
// flow claim.
func (e *Engine) flowWorker(claim *engine.ClaimParams) (engine.WorkerKey, bool) {
	if claim == nil {
		return engine.WorkerKey{}, false
	}
	k := engine.WorkerKey{Namespace: claim.Namespace, InstanceID: claim.InstanceID}
	return k, e.flowWorkers.Has(k)
}

// errDue says the claim of a pipeline found due scheduled work and claimed
// nothing: the caller claims again (Claim makes that work ready first).
var errDue = errors.New("roster: due scheduled work is to be made ready")

// pipeline runs the settle's statements on conn in one batch. Its error is
// a statement's (the batch's transaction rolled back: nothing written).
func (e *Engine) pipeline(ctx context.Context, conn *pgxpool.Conn, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) (engine.SettleResult, error) {
	res := engine.SettleResult{Errs: make([]error, len(outcomes))}
	complete := pgdb.LeaseCompleteManyParams{Now: nowMs}
	var completes, fails, snoozes []int
	for i, o := range outcomes {
		switch {
		case o.Fail:
			fails = append(fails, i)
			continue
		case o.Snooze:
			snoozes = append(snoozes, i)
			continue
		}
		completes = append(completes, i)
		complete.Ids = append(complete.Ids, o.Lease.ExecutionID)
		complete.Epochs = append(complete.Epochs, o.Lease.Epoch)
		complete.LeaseIds = append(complete.LeaseIds, o.Lease.LeaseID)
		complete.Results = append(complete.Results, o.Result)
	}
	failParams := func(i int) pgdb.LeaseFailParams {
		o := outcomes[i]
		return pgdb.LeaseFailParams{LastError: o.Reason, Now: nowMs, ID: o.Lease.ExecutionID, LeaseID: o.Lease.LeaseID, Epoch: o.Lease.Epoch}
	}
	snoozeParams := func(i int) pgdb.LeaseSnoozeParams {
		o := outcomes[i]
		return pgdb.LeaseSnoozeParams{RunAt: o.RunAtMs, Now: nowMs, ID: o.Lease.ExecutionID, Epoch: o.Lease.Epoch, LeaseID: o.Lease.LeaseID}
	}
	claimParams := func() pgdb.ExecutionClaimParams {
		return pgdb.ExecutionClaimParams{
			LeaseIds: claim.LeaseIDs, Namespace: claim.Namespace, Now: claim.NowMs, InstanceID: claim.InstanceID,
			Promote: true, ExpiresAtMs: claim.StoredExpiresAtMs(), Bind: claim.Bound, MaxBytes: claim.Bytes(),
		}
	}

	// The generated code runs twice: against a recorder, to queue each
	// statement with its arguments, then against the batch's results, to
	// read each in turn.
	rec := &recorder{}
	prelude := e.sess.prelude() // behind PgBouncer: roster's settings first
	for _, q := range prelude {
		rec.batch.Queue(q)
	}
	record := pgdb.New(rec)
	lockWorkers := e.lockWorkers(outcomes, claim)
	_ = lockWorkers(ctx, record) // the lock order: worker locks first
	if len(completes) > 0 {
		_, _ = record.LeaseCompleteMany(ctx, complete)
	}
	for _, i := range fails {
		_, _ = record.LeaseFail(ctx, failParams(i))
	}
	for _, i := range snoozes {
		_, _ = record.LeaseSnooze(ctx, snoozeParams(i))
	}
	// A worker whose last claim was a flow claim claims as one: the lane
	// locks come last in the lock order, after the executions the outcomes
	// end (a claim starts waiting executions, a settle ends running ones; a
	// claim waits for an execution's row only when another claim has
	// started it since the pick, and should that ever close a cycle the
	// deadlock is retried).
	flowKey, flow := e.flowWorker(claim)
	switch {
	case claim != nil && flow:
		_, _ = record.ExecutionClaimFlow(ctx, flowParams(*claim))
	case claim != nil:
		_, _ = record.ExecutionClaim(ctx, claimParams())
	}
	began := time.Now()
	br := conn.SendBatch(ctx, &rec.batch)
	read := pgdb.New(replay{br})
	fail := func(err error) (engine.SettleResult, error) {
		_ = br.Close()
		return res, translate(err)
	}
	for range prelude {
		if _, err := br.Exec(); err != nil {
			return fail(err)
		}
	}
	if err := lockWorkers(ctx, read); err != nil {
		return fail(err)
	}
	if len(completes) > 0 {
		done, err := read.LeaseCompleteMany(ctx, complete)
		if err != nil {
			return fail(err)
		}
		written := make(map[engine.LeaseRef]bool, len(done))
		for _, r := range done {
			written[engine.LeaseRef{ExecutionID: r.ID, LeaseID: r.LeaseID.UUID, Epoch: r.Epoch}] = true
		}
		for _, i := range completes {
			if !written[outcomes[i].Lease] {
				res.Errs[i] = engine.ErrNoRows
			}
		}
	}
	for _, i := range fails {
		_, err := read.LeaseFail(ctx, failParams(i))
		if errors.Is(err, pgx.ErrNoRows) {
			res.Errs[i] = engine.ErrNoRows
			continue
		}
		if err != nil {
			return fail(err)
		}
	}
	for _, i := range snoozes {
		_, err := read.LeaseSnooze(ctx, snoozeParams(i))
		if errors.Is(err, pgx.ErrNoRows) {
			res.Errs[i] = engine.ErrNoRows
			continue
		}
		if err != nil {
			return fail(err)
		}
	}
	switch {
	case claim != nil && flow:
		rows, err := read.ExecutionClaimFlow(ctx, flowParams(*claim))
		if err != nil {
			return fail(err)
		}
		res.Claim, res.ClaimErr = flowResult(rows, *claim) // not alive: the outcomes stand
	case claim != nil:
		r, err := read.ExecutionClaim(ctx, claimParams())
		if err != nil {
			return fail(err)
		}
		var due bool
		res.Claim, due, res.ClaimErr = claimResult(r, *claim)
		if due {
			res.ClaimErr = errDue
		}
	}
	if err := br.Close(); err != nil { // the commit
		return engine.SettleResult{Errs: res.Errs}, translate(err)
	}
	if flow && res.ClaimErr == nil && !res.Claim.Flow {
		e.flowWorkers.Set(flowKey, false) // its lanes no longer have limits or groups
	}
	if e.cfg.Observer != nil {
		e.cfg.Observer.Committed(time.Since(began), len(outcomes))
	}
	return res, nil
}

// settleApart writes each outcome alone (the completions first in one
// statement, then one by one should that fail), then claims; each statement
// in autocommit.
func (e *Engine) settleApart(ctx context.Context, nowMs int64, outcomes []engine.Outcome, claim *engine.ClaimParams) engine.SettleResult {
	res := engine.SettleResult{Errs: make([]error, len(outcomes))}
	var completes []int
	var refs []engine.LeaseRef
	var results [][]byte
	for i, o := range outcomes {
		if !o.Fail && !o.Snooze {
			completes = append(completes, i)
			refs = append(refs, o.Lease)
			results = append(results, o.Result)
		}
	}
	if len(completes) > 0 {
		var done []engine.LeaseRef
		lockWorkers := e.lockWorkers(outcomes, claim)
		err := e.write(ctx, func(ctx context.Context, q queries) error {
			if err := lockWorkers(ctx, q.q); err != nil {
				return translate(err)
			}
			var err error
			done, err = q.LeaseCompleteMany(ctx, refs, results, nowMs)
			return err
		}, true)
		switch {
		case err == nil:
			written := make(map[engine.LeaseRef]bool, len(done))
			for _, l := range done {
				written[l] = true
			}
			for _, i := range completes {
				if !written[outcomes[i].Lease] {
					res.Errs[i] = engine.ErrNoRows
				}
			}
		case engine.Transient(err):
			for _, i := range completes {
				res.Errs[i] = err
			}
		default:
			for _, i := range completes {
				o := outcomes[i]
				res.Errs[i] = e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
					return q.LeaseComplete(ctx, o.Lease, nowMs, o.Result)
				})
			}
		}
	}
	for i, o := range outcomes {
		switch {
		case o.Fail:
			res.Errs[i] = e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
				return q.LeaseFail(ctx, o.Lease, nowMs, o.Reason)
			})
		case o.Snooze:
			res.Errs[i] = e.WriteOne(ctx, func(ctx context.Context, q engine.Queries) error {
				return q.LeaseSnooze(ctx, o.Lease, nowMs, o.RunAtMs)
			})
		}
	}
	if claim != nil {
		res.Claim, res.ClaimErr = e.ExecutionClaim(ctx, *claim)
	}
	return res
}

// errRecorded is what the recorder answers: the statement was queued, not
// run.
var errRecorded = errors.New("roster: statement recorded for a batch")

// recorder is a pgdb.DBTX that queues each statement it is given, with its
// arguments, in a batch.
type recorder struct{ batch pgx.Batch }

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.batch.Queue(sql, args...)
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.batch.Queue(sql, args...)
	return recordedRow{}
}

type recordedRow struct{}

func (recordedRow) Scan(...any) error { return errRecorded }

// replay is a pgdb.DBTX that answers each statement with the next result of
// a batch that queued the same statements in the same order.
type replay struct{ br pgx.BatchResults }

func (r replay) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) { return r.br.Exec() }

func (r replay) Query(context.Context, string, ...any) (pgx.Rows, error) { return r.br.Query() }

func (r replay) QueryRow(context.Context, string, ...any) pgx.Row { return r.br.QueryRow() }
