package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rosterdb/roster/db"
)

// AgentState is the state of an agent process.
type AgentState string

// The agent states. Every state but AgentTerminal is live.
const (
	AgentSpawned   AgentState = "spawned"
	AgentRunning   AgentState = "running"
	AgentSuspended AgentState = "suspended"
	AgentTerminal  AgentState = "terminal"
)

func (s AgentState) known() bool {
	switch s {
	case AgentSpawned, AgentRunning, AgentSuspended, AgentTerminal:
		return true
	}
	return false
}

// TerminalReason says why an agent became terminal.
type TerminalReason string

// The terminal reasons.
const (
	ReasonCompleted   TerminalReason = "completed"
	ReasonFailed      TerminalReason = "failed"
	ReasonKilled      TerminalReason = "killed"
	ReasonAbandoned   TerminalReason = "abandoned"
	ReasonHostRestart TerminalReason = "host_restart"
)

func (r TerminalReason) known() bool {
	switch r {
	case ReasonCompleted, ReasonFailed, ReasonKilled, ReasonAbandoned, ReasonHostRestart:
		return true
	}
	return false
}

// Agent is the record of one long-running agent process.
type Agent struct {
	ID                                              string
	State                                           AgentState
	TerminalReason                                  TerminalReason // "" unless State is terminal
	Provider                                        string
	ProviderSessionID                               string // "" = none
	CheckpointSessionID                             string // "" = none
	CheckpointCursor                                int64
	OwnerActor, OwnerPeerClass, OwnerWriteNamespace string
	OwnerVisibleNamespaces                          []string // kept in the order given
	SpawnFingerprint                                string
	SpawnedAt, StateChangedAt                       time.Time // zero: the Store's clock
	IdempotencyKey                                  string    // "" = none
}

// UpdateAgentStateArgs are the arguments of UpdateAgentState.
type UpdateAgentStateArgs struct {
	ID          string
	State       AgentState
	Reason      TerminalReason
	ExpectState AgentState // "" = any; otherwise compare-and-set
	At          time.Time
}

// ListAgentsArgs select a page of agents in id order. Each filter is optional:
// State, OwnerActor, and VisibleIn (the agent's write namespace or one of its
// visible namespaces).
type ListAgentsArgs struct {
	State                        AgentState
	OwnerActor, VisibleIn, After string
	Limit                        int
}

// AgentPage is one page of agents; Next is empty exactly on the last page.
type AgentPage struct {
	Agents []Agent
	Next   string
}

// InsertAgent stores an agent record as given (a zero SpawnedAt or
// StateChangedAt takes the Store's clock). A taken id, a provider session held
// by a live agent, or a reused (owner, idempotency key) is ErrConflict.
func (s *Store) InsertAgent(ctx context.Context, a Agent) error {
	a, err := s.prepareAgent(a)
	if err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q *db.Queries) error {
		return insertAgent(ctx, q, a)
	})
}

// SpawnAgent is InsertAgent made idempotent by IdempotencyKey: when the owner
// actor already used the key, the same SpawnFingerprint returns the stored
// agent with created=false and another fingerprint is ErrConflict. Without a
// key it is a plain insert.
func (s *Store) SpawnAgent(ctx context.Context, a Agent) (Agent, bool, error) {
	a, err := s.prepareAgent(a)
	if err != nil {
		return Agent{}, false, err
	}
	stored, created := a, true
	err = s.write(ctx, func(ctx context.Context, q *db.Queries) error {
		if a.IdempotencyKey != "" {
			row, err := q.AgentFindByIdempotencyKey(ctx, db.AgentFindByIdempotencyKeyParams{
				OwnerActor: a.OwnerActor, IdempotencyKey: nullString(a.IdempotencyKey),
			})
			switch {
			case err == nil:
				if row.SpawnFingerprint != a.SpawnFingerprint {
					return fmt.Errorf("%w: idempotency key %q of owner %q was used with another spawn fingerprint",
						ErrConflict, a.IdempotencyKey, a.OwnerActor)
				}
				created = false
				stored, err = agentFromRow(row)
				return err
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		return insertAgent(ctx, q, a)
	})
	if err != nil {
		return Agent{}, false, err
	}
	return stored, created, nil
}

// GetAgent returns one agent, or ErrNotFound.
func (s *Store) GetAgent(ctx context.Context, id string) (Agent, error) {
	if err := validIdentifier("ID", id); err != nil {
		return Agent{}, err
	}
	var a Agent
	err := s.read(ctx, func(q *db.Queries) error {
		row, err := q.AgentGet(ctx, id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: agent %q", ErrNotFound, id)
		}
		if err != nil {
			return err
		}
		a, err = agentFromRow(row)
		return err
	})
	return a, err
}

// UpdateAgentState moves an agent through its state machine:
// spawned→running, running→running (activity: only StateChangedAt moves),
// running→suspended, suspended→running, and any live state→terminal with a
// reason. suspended→suspended and terminal→terminal change nothing and return
// nil; anything else is ErrInvalidTransition. Checks run in this order: the
// reason must fit the state (ErrInvalidInput), the agent must exist
// (ErrNotFound), ExpectState must match (ErrConflict), then the transition.
func (s *Store) UpdateAgentState(ctx context.Context, a UpdateAgentStateArgs) error {
	if err := validIdentifier("ID", a.ID); err != nil {
		return err
	}
	if err := validStateAndReason("State", a.State, "Reason", a.Reason); err != nil {
		return err
	}
	if a.ExpectState != "" && !a.ExpectState.known() {
		return invalid("ExpectState", "unknown agent state %q", a.ExpectState)
	}
	at := s.now(a.At).UnixMilli()
	return s.write(ctx, func(ctx context.Context, q *db.Queries) error {
		row, err := q.AgentGet(ctx, a.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: agent %q", ErrNotFound, a.ID)
		}
		if err != nil {
			return err
		}
		from := AgentState(row.State)
		if a.ExpectState != "" && from != a.ExpectState {
			return fmt.Errorf("%w: agent %q is %s, expected %s", ErrConflict, a.ID, from, a.ExpectState)
		}
		change, err := transition(from, a.State)
		if err != nil || !change {
			return err
		}
		return q.AgentSetState(ctx, db.AgentSetStateParams{
			ID:               a.ID,
			State:            string(a.State),
			TerminalReason:   nullString(string(a.Reason)),
			StateChangedAtMs: at,
		})
	})
}

// transition reports whether from→to changes the agent (false for the
// no-ops), or ErrInvalidTransition.
func transition(from, to AgentState) (bool, error) {
	switch {
	case from == to && (from == AgentSuspended || from == AgentTerminal):
		return false, nil
	case from == AgentSpawned && to == AgentRunning,
		from == AgentRunning && to == AgentRunning,
		from == AgentRunning && to == AgentSuspended,
		from == AgentSuspended && to == AgentRunning,
		from != AgentTerminal && to == AgentTerminal:
		return true, nil
	}
	return false, fmt.Errorf("%w: %s → %s", ErrInvalidTransition, from, to)
}

// SetAgentCheckpoint records an agent's checkpoint: its session ("" = none)
// and cursor. A missing agent is ErrNotFound.
func (s *Store) SetAgentCheckpoint(ctx context.Context, id, sessionID string, cursor int64) error {
	if err := validIdentifier("ID", id); err != nil {
		return err
	}
	if err := validOptionalIdentifier("CheckpointSessionID", sessionID); err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q *db.Queries) error {
		n, err := q.AgentSetCheckpoint(ctx, db.AgentSetCheckpointParams{
			ID: id, CheckpointSessionID: nullString(sessionID), CheckpointCursor: cursor,
		})
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: agent %q", ErrNotFound, id)
		}
		return err
	})
}

// FindAgentByIdempotencyKey returns the agent an owner actor spawned under a
// key, or ErrNotFound.
func (s *Store) FindAgentByIdempotencyKey(ctx context.Context, ownerActor, key string) (Agent, error) {
	if err := validIdentifier("OwnerActor", ownerActor); err != nil {
		return Agent{}, err
	}
	if err := validIdentifier("IdempotencyKey", key); err != nil {
		return Agent{}, err
	}
	return s.findAgent(ctx, func(q *db.Queries) (db.Agent, error) {
		return q.AgentFindByIdempotencyKey(ctx, db.AgentFindByIdempotencyKeyParams{
			OwnerActor: ownerActor, IdempotencyKey: nullString(key),
		})
	}, "no agent of owner %q with idempotency key %q", ownerActor, key)
}

// FindLiveAgentByProviderSession returns the live agent holding a provider
// session, or ErrNotFound.
func (s *Store) FindLiveAgentByProviderSession(ctx context.Context, provider, sessionID string) (Agent, error) {
	if err := validIdentifier("Provider", provider); err != nil {
		return Agent{}, err
	}
	if err := validIdentifier("ProviderSessionID", sessionID); err != nil {
		return Agent{}, err
	}
	return s.findAgent(ctx, func(q *db.Queries) (db.Agent, error) {
		return q.AgentFindLiveByProviderSession(ctx, db.AgentFindLiveByProviderSessionParams{
			Provider: provider, ProviderSessionID: nullString(sessionID),
		})
	}, "no live agent holds session %q of provider %q", sessionID, provider)
}

func (s *Store) findAgent(ctx context.Context, find func(q *db.Queries) (db.Agent, error), notFound string, args ...any) (Agent, error) {
	var a Agent
	err := s.read(ctx, func(q *db.Queries) error {
		row, err := find(q)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: "+notFound, append([]any{ErrNotFound}, args...)...)
		}
		if err != nil {
			return err
		}
		a, err = agentFromRow(row)
		return err
	})
	return a, err
}

// TerminateLiveAgents is the boot scan after a host restart: every live agent
// becomes terminal with reason host_restart at at. It returns how many.
func (s *Store) TerminateLiveAgents(ctx context.Context, at time.Time) (int, error) {
	atMs := s.now(at).UnixMilli()
	var n int64
	err := s.write(ctx, func(ctx context.Context, q *db.Queries) error {
		var err error
		n, err = q.AgentTerminateLive(ctx, atMs)
		return err
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		s.log.Info("roster: terminated live agents after a host restart", "count", n)
	}
	return int(n), nil
}

const agentsCursor = "agents"

// ListAgents pages agents in id order, filtered by state, owner actor and a
// namespace they are visible in.
func (s *Store) ListAgents(ctx context.Context, a ListAgentsArgs) (AgentPage, error) {
	if a.State != "" && !a.State.known() {
		return AgentPage{}, invalid("State", "unknown agent state %q", a.State)
	}
	if err := validOptionalIdentifier("OwnerActor", a.OwnerActor); err != nil {
		return AgentPage{}, err
	}
	if err := validOptionalIdentifier("VisibleIn", a.VisibleIn); err != nil {
		return AgentPage{}, err
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return AgentPage{}, err
	}
	var after string
	if _, err := decodeCursor(a.After, agentsCursor, &after); err != nil {
		return AgentPage{}, err
	}
	n := int64(limit) + 1
	var rows []db.Agent
	err = s.read(ctx, func(q *db.Queries) error {
		var err error
		switch {
		case a.VisibleIn != "":
			rows, err = q.AgentListVisibleIn(ctx, db.AgentListVisibleInParams{
				Namespace: a.VisibleIn, AfterID: after, State: string(a.State), OwnerActor: a.OwnerActor, Limit: n,
			})
		case a.OwnerActor != "":
			rows, err = q.AgentListByOwner(ctx, db.AgentListByOwnerParams{
				OwnerActor: a.OwnerActor, AfterID: after, State: string(a.State), Limit: n,
			})
		case a.State != "":
			rows, err = q.AgentListByState(ctx, db.AgentListByStateParams{State: string(a.State), AfterID: after, Limit: n})
		default:
			rows, err = q.AgentList(ctx, db.AgentListParams{AfterID: after, Limit: n})
		}
		return err
	})
	if err != nil {
		return AgentPage{}, err
	}
	var page AgentPage
	if len(rows) > limit {
		rows = rows[:limit]
		page.Next = encodeCursor(agentsCursor, rows[limit-1].ID)
	}
	page.Agents = make([]Agent, len(rows))
	for i, r := range rows {
		if page.Agents[i], err = agentFromRow(r); err != nil {
			return AgentPage{}, err
		}
	}
	return page, nil
}

// prepareAgent validates a record and fills its zero times from the clock.
func (s *Store) prepareAgent(a Agent) (Agent, error) {
	for _, f := range []struct{ name, v string }{
		{"ID", a.ID},
		{"Provider", a.Provider},
		{"OwnerActor", a.OwnerActor},
		{"OwnerPeerClass", a.OwnerPeerClass},
		{"OwnerWriteNamespace", a.OwnerWriteNamespace},
		{"SpawnFingerprint", a.SpawnFingerprint},
	} {
		if err := validIdentifier(f.name, f.v); err != nil {
			return Agent{}, err
		}
	}
	for _, f := range []struct{ name, v string }{
		{"ProviderSessionID", a.ProviderSessionID},
		{"CheckpointSessionID", a.CheckpointSessionID},
		{"IdempotencyKey", a.IdempotencyKey},
	} {
		if err := validOptionalIdentifier(f.name, f.v); err != nil {
			return Agent{}, err
		}
	}
	for i, ns := range a.OwnerVisibleNamespaces {
		if err := validIdentifier(fmt.Sprintf("OwnerVisibleNamespaces[%d]", i), ns); err != nil {
			return Agent{}, err
		}
	}
	if err := validStateAndReason("State", a.State, "TerminalReason", a.TerminalReason); err != nil {
		return Agent{}, err
	}
	now := s.now(time.Time{})
	if a.SpawnedAt.IsZero() {
		a.SpawnedAt = now
	}
	if a.StateChangedAt.IsZero() {
		a.StateChangedAt = now
	}
	a.SpawnedAt = a.SpawnedAt.UTC().Truncate(time.Millisecond)
	a.StateChangedAt = a.StateChangedAt.UTC().Truncate(time.Millisecond)
	if len(a.OwnerVisibleNamespaces) == 0 {
		a.OwnerVisibleNamespaces = nil
	}
	return a, nil
}

// validStateAndReason checks that a state is known and that a reason is given
// exactly when the state is terminal.
func validStateAndReason(stateField string, st AgentState, reasonField string, r TerminalReason) error {
	if !st.known() {
		return invalid(stateField, "unknown agent state %q", st)
	}
	if r != "" && !r.known() {
		return invalid(reasonField, "unknown terminal reason %q", r)
	}
	if st == AgentTerminal && r == "" {
		return invalid(reasonField, "a terminal agent needs a reason")
	}
	if st != AgentTerminal && r != "" {
		return invalid(reasonField, "a %s agent has no terminal reason", st)
	}
	return nil
}

func insertAgent(ctx context.Context, q *db.Queries, a Agent) error {
	err := q.AgentInsert(ctx, db.AgentInsertParams{
		ID:                     a.ID,
		State:                  string(a.State),
		TerminalReason:         nullString(string(a.TerminalReason)),
		Provider:               a.Provider,
		ProviderSessionID:      nullString(a.ProviderSessionID),
		CheckpointSessionID:    nullString(a.CheckpointSessionID),
		CheckpointCursor:       a.CheckpointCursor,
		OwnerActor:             a.OwnerActor,
		OwnerPeerClass:         a.OwnerPeerClass,
		OwnerWriteNamespace:    a.OwnerWriteNamespace,
		OwnerVisibleNamespaces: jsonArray(a.OwnerVisibleNamespaces),
		SpawnFingerprint:       a.SpawnFingerprint,
		SpawnedAtMs:            a.SpawnedAt.UnixMilli(),
		StateChangedAtMs:       a.StateChangedAt.UnixMilli(),
		IdempotencyKey:         nullString(a.IdempotencyKey),
	})
	return agentWriteError(err, a)
}

// agentWriteError translates the agents table's constraint violations.
func agentWriteError(err error, a Agent) error {
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err, "agents.id"):
		return fmt.Errorf("%w: agent id %q is taken", ErrConflict, a.ID)
	case isUniqueViolation(err, "agents.provider, agents.provider_session_id"):
		return fmt.Errorf("%w: a live agent holds session %q of provider %q", ErrConflict, a.ProviderSessionID, a.Provider)
	case isUniqueViolation(err, "agents.owner_actor, agents.idempotency_key"):
		return fmt.Errorf("%w: idempotency key %q of owner %q is used", ErrConflict, a.IdempotencyKey, a.OwnerActor)
	case isUniqueViolation(err):
		return fmt.Errorf("%w: %s", ErrConflict, strings.TrimPrefix(err.Error(), "constraint failed: "))
	case isCheckViolation(err):
		return fmt.Errorf("%w: agent %q breaks a rule of the ledger: %v", ErrInvalidInput, a.ID, err)
	}
	return err
}

func agentFromRow(r db.Agent) (Agent, error) {
	visible, err := parseJSONArray(r.OwnerVisibleNamespaces)
	if err != nil {
		return Agent{}, err
	}
	return Agent{
		ID:                     r.ID,
		State:                  AgentState(r.State),
		TerminalReason:         TerminalReason(r.TerminalReason.String),
		Provider:               r.Provider,
		ProviderSessionID:      r.ProviderSessionID.String,
		CheckpointSessionID:    r.CheckpointSessionID.String,
		CheckpointCursor:       r.CheckpointCursor,
		OwnerActor:             r.OwnerActor,
		OwnerPeerClass:         r.OwnerPeerClass,
		OwnerWriteNamespace:    r.OwnerWriteNamespace,
		OwnerVisibleNamespaces: visible,
		SpawnFingerprint:       r.SpawnFingerprint,
		SpawnedAt:              msTime(r.SpawnedAtMs),
		StateChangedAt:         msTime(r.StateChangedAtMs),
		IdempotencyKey:         r.IdempotencyKey.String,
	}, nil
}

// nullString maps "" to NULL.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
