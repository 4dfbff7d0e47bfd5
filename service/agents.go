package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rosterdb/roster/internal/engine"
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
	Host                                            string    // "" = none: the host that runs the agent
	// HolderNamespace and HolderInstanceID name the worker registration of
	// the runtime that runs the agent (both "" = none; one without the other
	// is ErrInvalidInput). When MarkWorkerDead or a sweep removes that
	// registration, the agent, if live, becomes terminal with reason
	// abandoned at that time. A holder need not be registered yet.
	HolderNamespace, HolderInstanceID string
}

// UpdateAgentStateArgs are the arguments of UpdateAgentState.
type UpdateAgentStateArgs struct {
	ID          string
	State       AgentState
	Reason      TerminalReason
	ExpectState AgentState // "" = any; otherwise compare-and-set
	At          time.Time
}

// ListAgentsArgs select a page of agents in id order. Each filter is optional
// ("" = any): State, OwnerActor, VisibleIn (the agent's write namespace or one
// of its visible namespaces), Host, and the holder (HolderNamespace and
// HolderInstanceID, both or neither, else ErrInvalidInput).
type ListAgentsArgs struct {
	State                             AgentState
	OwnerActor, VisibleIn, After      string
	Host                              string
	HolderNamespace, HolderInstanceID string
	Limit                             int
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
	if err := s.notClosed(); err != nil {
		return err
	}
	a, err := s.prepareAgent(a)
	if err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		return agentWriteError(q.AgentInsert(ctx, agentRow(a)), a)
	})
}

// SpawnAgent is InsertAgent made idempotent by IdempotencyKey: when the owner
// actor already used the key, the same SpawnFingerprint returns the stored
// agent with created=false and another fingerprint is ErrConflict. Without a
// key it is a plain insert.
func (s *Store) SpawnAgent(ctx context.Context, a Agent) (Agent, bool, error) {
	if err := s.notClosed(); err != nil {
		return Agent{}, false, err
	}
	a, err := s.prepareAgent(a)
	if err != nil {
		return Agent{}, false, err
	}
	stored, created := a, true
	err = s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		if a.IdempotencyKey == "" {
			return agentWriteError(q.AgentInsert(ctx, agentRow(a)), a)
		}
		// The insert skips a used key in the statement that writes, so two
		// concurrent spawns with one key store one agent.
		inserted, err := q.AgentSpawn(ctx, agentRow(a))
		if err != nil || inserted {
			return agentWriteError(err, a)
		}
		row, err := q.AgentFindByIdempotencyKey(ctx, a.OwnerActor, a.IdempotencyKey)
		if err != nil {
			return err
		}
		if row.SpawnFingerprint != a.SpawnFingerprint {
			return fmt.Errorf("%w: idempotency key %q of owner %q was used with another spawn fingerprint",
				ErrConflict, a.IdempotencyKey, a.OwnerActor)
		}
		created, stored = false, agentFromRow(row)
		return nil
	})
	if err != nil {
		return Agent{}, false, err
	}
	return stored, created, nil
}

// GetAgent returns one agent, or ErrNotFound.
func (s *Store) GetAgent(ctx context.Context, id string) (Agent, error) {
	if err := s.notClosed(); err != nil {
		return Agent{}, err
	}
	if err := validIdentifier("ID", id); err != nil {
		return Agent{}, err
	}
	return s.findAgent(ctx, func(ctx context.Context, q engine.Queries) (engine.Agent, error) {
		return q.AgentGet(ctx, id)
	}, "agent %q", id)
}

// casAttempts bounds how often UpdateAgentState re-reads an agent whose state
// another writer changed between its read and its compare-and-set.
const casAttempts = 5

// UpdateAgentState moves an agent through its state machine:
// spawned→running, running→running (activity: only StateChangedAt moves),
// running→suspended, suspended→running, and any live state→terminal with a
// reason. suspended→suspended and terminal→terminal change nothing and return
// nil; anything else is ErrInvalidTransition. Checks run in this order: the
// reason must fit the state (ErrInvalidInput), the agent must exist
// (ErrNotFound), ExpectState must match (ErrConflict), then the transition.
func (s *Store) UpdateAgentState(ctx context.Context, a UpdateAgentStateArgs) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validIdentifier("ID", a.ID); err != nil {
		return err
	}
	if err := validStateAndReason("State", a.State, "Reason", a.Reason); err != nil {
		return err
	}
	if a.ExpectState != "" && !a.ExpectState.known() {
		return invalid("ExpectState", "unknown agent state %q", a.ExpectState)
	}
	at, err := s.at("At", a.At)
	if err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		// The rules are checked on the state read; the write applies only if
		// the agent is still in that state (compare-and-set in the statement
		// that writes), else the rules are checked again on the new state.
		for range casAttempts {
			row, err := q.AgentGet(ctx, a.ID)
			if errors.Is(err, engine.ErrNoRows) {
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
			done, err := q.AgentSetState(ctx, a.ID, string(from), string(a.State), string(a.Reason), at)
			if err != nil || done {
				return err
			}
		}
		return fmt.Errorf("%w: agent %q kept changing state under concurrent updates", ErrConflict, a.ID)
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
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validIdentifier("ID", id); err != nil {
		return err
	}
	if err := validOptionalIdentifier("CheckpointSessionID", sessionID); err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		found, err := q.AgentSetCheckpoint(ctx, id, sessionID, cursor)
		if err == nil && !found {
			err = fmt.Errorf("%w: agent %q", ErrNotFound, id)
		}
		return err
	})
}

// SetAgentHolder moves a live agent to another worker registration, named by
// holderNamespace and holderInstanceID (both "": none; one without the other
// is ErrInvalidInput). The registration need not exist yet. A terminal agent
// is ErrInvalidTransition, an unknown one ErrNotFound.
func (s *Store) SetAgentHolder(ctx context.Context, id, holderNamespace, holderInstanceID string) error {
	if err := s.notClosed(); err != nil {
		return err
	}
	if err := validIdentifier("ID", id); err != nil {
		return err
	}
	if err := validHolder(holderNamespace, holderInstanceID); err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		// The write checks that the agent is live in the statement that
		// writes; the read after a miss only says why.
		done, err := q.AgentSetHolder(ctx, id, holderNamespace, holderInstanceID)
		if err != nil || done {
			return err
		}
		_, err = q.AgentGet(ctx, id)
		switch {
		case errors.Is(err, engine.ErrNoRows):
			return fmt.Errorf("%w: agent %q", ErrNotFound, id)
		case err != nil:
			return err
		}
		return fmt.Errorf("%w: agent %q is terminal", ErrInvalidTransition, id)
	})
}

// validHolder checks a holder: both fields identifiers, or both "".
func validHolder(namespace, instanceID string) error {
	switch {
	case namespace == "" && instanceID == "":
		return nil
	case namespace == "":
		return invalid("HolderNamespace", "a holder needs both its namespace and its instance id (HolderInstanceID is %q)", instanceID)
	case instanceID == "":
		return invalid("HolderInstanceID", "a holder needs both its namespace and its instance id (HolderNamespace is %q)", namespace)
	}
	if err := validIdentifier("HolderNamespace", namespace); err != nil {
		return err
	}
	return validIdentifier("HolderInstanceID", instanceID)
}

// abandonHeldAgents ends, in q's transaction, every live agent that one of
// the registrations holds, with reason abandoned at atMs: the end of those
// registrations (MarkWorkerDead, a sweep) ends the agents their runtimes run.
func abandonHeldAgents(ctx context.Context, q engine.Queries, holders []engine.WorkerKey, atMs int64) error {
	_, err := q.AgentAbandonHeldBy(ctx, holders, atMs)
	return err
}

// FindAgentByIdempotencyKey returns the agent an owner actor spawned under a
// key, or ErrNotFound.
func (s *Store) FindAgentByIdempotencyKey(ctx context.Context, ownerActor, key string) (Agent, error) {
	if err := s.notClosed(); err != nil {
		return Agent{}, err
	}
	if err := validIdentifier("OwnerActor", ownerActor); err != nil {
		return Agent{}, err
	}
	if err := validIdentifier("IdempotencyKey", key); err != nil {
		return Agent{}, err
	}
	return s.findAgent(ctx, func(ctx context.Context, q engine.Queries) (engine.Agent, error) {
		return q.AgentFindByIdempotencyKey(ctx, ownerActor, key)
	}, "no agent of owner %q with idempotency key %q", ownerActor, key)
}

// FindLiveAgentByProviderSession returns the live agent holding a provider
// session, or ErrNotFound.
func (s *Store) FindLiveAgentByProviderSession(ctx context.Context, provider, sessionID string) (Agent, error) {
	if err := s.notClosed(); err != nil {
		return Agent{}, err
	}
	if err := validIdentifier("Provider", provider); err != nil {
		return Agent{}, err
	}
	if err := validIdentifier("ProviderSessionID", sessionID); err != nil {
		return Agent{}, err
	}
	return s.findAgent(ctx, func(ctx context.Context, q engine.Queries) (engine.Agent, error) {
		return q.AgentFindLiveByProviderSession(ctx, provider, sessionID)
	}, "no live agent holds session %q of provider %q", sessionID, provider)
}

func (s *Store) findAgent(ctx context.Context, find func(ctx context.Context, q engine.Queries) (engine.Agent, error), notFound string, args ...any) (Agent, error) {
	var a Agent
	err := s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		row, err := find(ctx, q)
		if errors.Is(err, engine.ErrNoRows) {
			return fmt.Errorf("%w: "+notFound, append([]any{ErrNotFound}, args...)...)
		}
		a = agentFromRow(row)
		return err
	})
	return a, err
}

// TerminateLiveAgents is the boot scan after a host restart: every live agent
// becomes terminal with reason host_restart at at. It returns how many.
func (s *Store) TerminateLiveAgents(ctx context.Context, at time.Time) (int, error) {
	if err := s.notClosed(); err != nil {
		return 0, err
	}
	atMs, err := s.at("at", at)
	if err != nil {
		return 0, err
	}
	var n int
	err = s.write(ctx, func(ctx context.Context, q engine.Queries) error {
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
	return n, nil
}

// TerminateLiveAgentsOnHost is the boot scan of one host on a database that
// many hosts share: every live agent whose Host is host becomes terminal with
// reason host_restart at at; no other agent is touched. It returns how many.
func (s *Store) TerminateLiveAgentsOnHost(ctx context.Context, host string, at time.Time) (int, error) {
	if err := s.notClosed(); err != nil {
		return 0, err
	}
	if err := validIdentifier("host", host); err != nil {
		return 0, err
	}
	atMs, err := s.at("at", at)
	if err != nil {
		return 0, err
	}
	var n int
	err = s.write(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		n, err = q.AgentTerminateLiveOnHost(ctx, host, atMs)
		return err
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		s.log.Info("roster: terminated the live agents of a restarted host", "host", host, "count", n)
	}
	return n, nil
}

const agentsCursor = "agents"

// ListAgents pages agents in id order, filtered by state, owner actor, a
// namespace they are visible in, host and holder. A host or holder with a
// live state walks the index of live agents by host (or reads the holder's
// live agents); of any state, or of terminal agents, and with no other filter,
// it walks the agents (of that state) in id order.
func (s *Store) ListAgents(ctx context.Context, a ListAgentsArgs) (AgentPage, error) {
	if err := s.notClosed(); err != nil {
		return AgentPage{}, err
	}
	if a.State != "" && !a.State.known() {
		return AgentPage{}, invalid("State", "unknown agent state %q", a.State)
	}
	if err := validOptionalIdentifier("OwnerActor", a.OwnerActor); err != nil {
		return AgentPage{}, err
	}
	if err := validOptionalIdentifier("VisibleIn", a.VisibleIn); err != nil {
		return AgentPage{}, err
	}
	if err := validOptionalIdentifier("Host", a.Host); err != nil {
		return AgentPage{}, err
	}
	if err := validHolder(a.HolderNamespace, a.HolderInstanceID); err != nil {
		return AgentPage{}, err
	}
	limit, err := pageLimit(a.Limit)
	if err != nil {
		return AgentPage{}, err
	}
	p := engine.AgentListParams{
		State: string(a.State), OwnerActor: a.OwnerActor, VisibleIn: a.VisibleIn,
		Host: a.Host, HolderNamespace: a.HolderNamespace, HolderInstanceID: a.HolderInstanceID, Limit: limit + 1,
	}
	if _, err := decodeCursor(a.After, agentsCursor, &p.AfterID); err != nil {
		return AgentPage{}, err
	}
	var rows []engine.Agent
	err = s.read(ctx, func(ctx context.Context, q engine.Queries) error {
		var err error
		rows, err = q.AgentList(ctx, p)
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
		page.Agents[i] = agentFromRow(r)
	}
	return page, nil
}
