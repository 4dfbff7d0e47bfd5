// Package engine is the seam between roster's public API (package service) and
// the databases it runs on. service states the rules of every operation; an
// engine (internal/engine/sqlite, ...) owns everything that differs between
// databases: connections, transactions, migrations, the SQL (through the code
// sqlc generates) and the translation of driver errors.
//
// The flow is one way: schema/ENGINE + queries/ENGINE → sqlc → db/ENGINE →
// internal/engine/ENGINE (implements Engine) → service. service imports this
// package and internal/engines (which picks an engine for a path), never an
// engine or a driver directly.
package engine

import (
	"context"
	"io/fs"
	"log/slog"
	"time"
)

// Engine is one open database.
type Engine interface {
	// Read runs fn with queries that read the database. Reads never wait for
	// writes.
	Read(ctx context.Context, fn func(ctx context.Context, q Queries) error) error
	// Snapshot is Read in one read-only transaction: every query of fn sees
	// the same consistent state of the database.
	Snapshot(ctx context.Context, fn func(ctx context.Context, q Queries) error) error
	// Write runs fn in a transaction of its own (or a savepoint of a shared
	// one) and returns once that transaction committed (nil) or fn's work was
	// rolled back (fn's error). Write fails with ErrOverloaded, having changed
	// nothing, when it cannot start within the configured admission time.
	Write(ctx context.Context, fn func(ctx context.Context, q Queries) error) error
	// WriteOne is Write for an fn whose writes are exactly one statement,
	// which is atomic by itself (it may read before or after): an engine may
	// run it without a transaction of its own (PostgreSQL saves the BEGIN
	// and COMMIT round trips).
	WriteOne(ctx context.Context, fn func(ctx context.Context, q Queries) error) error
	// Close releases the database. Writes queued or started after Close
	// began return ErrClosed.
	Close() error
	// Check looks for damage: the engine's own integrity check where it has
	// one, and the consistency rules the operations keep. It returns one
	// line per problem (none: sound).
	Check(ctx context.Context) ([]string, error)
	// ExecutionClaim (the claim: queries ExecutionClaim on PostgreSQL, its
	// pieces on SQLite) moves up to len(p.LeaseIDs) of the best claimable
	// executions for an alive worker to running under new leases, best
	// first (none: no leases; fewer when their payloads would exceed
	// p.Bytes()), and when it took fewer than asked reads the worker's
	// NextRunAtMs. Scheduled executions that are due are made ready first,
	// so that they compete (up to a thousand at a time). It returns the
	// leases only once their claim committed. A claim that finds nothing
	// claimable writes nothing: it is a read (on PostgreSQL it takes no
	// transaction id). Two claims never take the same execution. A worker
	// that is not alive is ErrNoRows.
	ExecutionClaim(ctx context.Context, p ClaimParams) (ClaimResult, error)
	// Settle writes finished handlers' outcomes at now, each fenced on its
	// own lease, then (claim not nil) claims as Claim does, each engine in its
	// cheapest way. One outcome's lost lease or error never drops, fails or
	// delays another, nor the claim.
	Settle(ctx context.Context, nowMs int64, outcomes []Outcome, claim *ClaimParams) SettleResult
	// Subscribe asks to hear when work may have become claimable in a
	// namespace through another connection or process (PostgreSQL:
	// LISTEN/NOTIFY; SQLite: a change check that writes nothing). It is a
	// hint: a subscriber still polls now and then.
	Subscribe(namespace string) Subscription
}

// LostKey is the key to Subscribe with to hear that running leases of
// namespace may have ended by another's hand (a cancel, a mark-dead, a
// sweep, a reclaim): PostgreSQL notifies it apart from new work; SQLite's
// change check signals every key.
func LostKey(namespace string) string { return "\x1e" + namespace }

// ScheduleKey is the key to Subscribe with to hear that a schedule was put
// or deleted through another connection or process (PostgreSQL notifies it;
// SQLite's change check signals every key).
const ScheduleKey = "\x1d"

// KeyedNotifier is an engine whose subscriptions hear only their own key's
// changes (PostgreSQL's notifications), so that one may stay armed for a
// rare change without waking at every commit of the database (SQLite's
// change check signals every key).
type KeyedNotifier interface {
	NotifiesByKey() bool
}

// Subscription hears about changes: C receives (coalesced, one pending at
// most) after a change that may have made work claimable, or after the
// engine lost track of changes (a listening connection re-established).
// Arm says its holder is waiting for a change now and Disarm that it no
// longer is: an engine whose watching costs (SQLite) watches only while some
// subscription is armed, and on arming looks at once for any change it did
// not see since it last looked. Close ends it.
type Subscription interface {
	C() <-chan struct{}
	Arm()
	Disarm()
	Close()
}

// ClaimResult is what a claim took.
type ClaimResult struct {
	Leases []ClaimedLease
	// NextRunAtMs is set when the claim took fewer executions than asked:
	// the earliest RunAt after now among the waiting executions of the
	// worker's lanes (0: none), when a worker should look again at the
	// latest; now itself when the claim stopped at its bound on payload
	// bytes with work left.
	NextRunAtMs int64
	// Held counts the worker's lanes whose ready work a cap, a rate or a
	// pause held back (a settle of such a lane may free room).
	Held int
	// Flow says one of the worker's lanes has limits or groups: the claim
	// was a flow claim (FlowClaim).
	Flow bool
}

// MaxClaimBytes bounds the payloads one claim returns: a claim takes fewer
// executions than asked when their payloads would exceed it (always at
// least one). PostgreSQL's arrays and protocol messages stop at 1 GiB.
const MaxClaimBytes = 64 << 20

// Outcome is a finished handler's result, for Settle.
type Outcome struct {
	Lease  LeaseRef
	Fail   bool   // fail the attempt with Reason; else complete it with Result
	Result []byte // nil is stored as no result
	Reason string
	// Snooze (Fail false) ends the lease without using up its attempt, the
	// execution waiting until RunAtMs (LeaseSnooze).
	Snooze  bool
	RunAtMs int64
}

// Name is how the outcome ends its attempt, as LeaseGetOutcome reads it:
// "completed", "failed" or "snoozed".
func (o Outcome) Name() string {
	switch {
	case o.Fail:
		return "failed"
	case o.Snooze:
		return "snoozed"
	}
	return "completed"
}

// Size is the bytes an outcome carries, to bound a batch.
func (o Outcome) Size() int { return len(o.Result) + len(o.Reason) }

// SettleResult reports what Settle did.
type SettleResult struct {
	// Errs[i] is outcome i's: nil when it was written, ErrNoRows when its
	// lease was lost (nothing written), else an error of its own (nothing
	// written for it; a transient one may pass).
	Errs []error
	// Claim is what the claim took (only what committed); ClaimErr is the
	// claim's own error (ErrNoRows: the worker is not alive).
	Claim    ClaimResult
	ClaimErr error
}

// Config is what service asks of an engine when it opens one.
type Config struct {
	Logger        *slog.Logger
	SyncFull      bool          // durable against a power cut (else against a process crash)
	ReadConns     int           // size of the read pool, where the engine has one
	QueueCapacity int           // writes waiting for the writer, where the engine has one
	Admission     time.Duration // how long a write may wait to be admitted
	BusyTimeout   time.Duration // how long to wait for another process's lock
	Migrate       bool          // apply pending migrations (else require a current schema)
	ReadOnly      bool          // never write, never migrate, never create
	Migrations    fs.FS         // nil: the engine's embedded migrations (tests substitute)
	// LocalClock is the local time an engine compares with the server's to
	// measure its offset (nil: time.Now; tests inject skew).
	LocalClock func() time.Time
	// Observer, when set, hears how long writes wait and commit.
	Observer Observer
}

// Observer hears an engine's write path: how long a write waited for the
// writer (SQLite) or a pooled connection (PostgreSQL) before it began, and
// how long each commit took and for how many writes. It must be fast and
// safe for concurrent use.
type Observer interface {
	WriteWaited(d time.Duration)
	Committed(d time.Duration, writes int)
}

// Enlister is an Engine that can run queries inside a transaction its
// caller began on the same database with a driver of its own (the
// transactional enqueue).
type Enlister interface {
	// InTx checks that tx is a transaction this engine can use (a type it
	// knows, open on its very database and schema: else ErrInvalidInput,
	// nothing written) and runs fn with queries on it. It neither commits
	// nor rolls back tx: what fn wrote exists when the caller commits, and
	// the wake-ups it sends are delivered then (PostgreSQL: NOTIFY inside
	// the transaction; SQLite: other connections see the commit through
	// their change check).
	InTx(ctx context.Context, tx any, fn func(ctx context.Context, q Queries) error) error
}

// Clocked is an Engine that offers a clock of its own, used when the caller
// sets none: on a database that many hosts share, liveness must be judged by
// one clock (PostgreSQL: the server's).
type Clocked interface {
	Clock() func() time.Time
}

// Admin runs the migration commands of the command-line tool on a database.
type Admin interface {
	// Version reports the recorded schema version (-1 when none) and the
	// latest version this build knows.
	Version(ctx context.Context) (version, latest int, err error)
	// Down rolls back steps migrations (0 = all) in one transaction.
	Down(ctx context.Context, steps int) error
	// Force records version (-1 = none) as the clean schema version without
	// running any migration.
	Force(ctx context.Context, version int) error
	// Close releases the database.
	Close() error
}
