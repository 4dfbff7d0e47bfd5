package service

// An agent record's validation, and its mapping to and from the engine's row.

import (
	"fmt"
	"time"

	"github.com/rosterdb/roster/internal/engine"
)

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
		{"Host", a.Host},
	} {
		if err := validOptionalIdentifier(f.name, f.v); err != nil {
			return Agent{}, err
		}
	}
	if err := validHolder(a.HolderNamespace, a.HolderInstanceID); err != nil {
		return Agent{}, err
	}
	for i, ns := range a.OwnerVisibleNamespaces {
		if err := validIdentifier(fmt.Sprintf("OwnerVisibleNamespaces[%d]", i), ns); err != nil {
			return Agent{}, err
		}
	}
	if err := validStateAndReason("State", a.State, "TerminalReason", a.TerminalReason); err != nil {
		return Agent{}, err
	}
	if err := validTime("SpawnedAt", a.SpawnedAt); err != nil {
		return Agent{}, err
	}
	if err := validTime("StateChangedAt", a.StateChangedAt); err != nil {
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

// agentWriteError translates the agent ledger's broken rules.
func agentWriteError(err error, a Agent) error {
	switch {
	case err == nil:
		return nil
	case engine.IsConstraint(err, engine.UniqueAgentID):
		return fmt.Errorf("%w: agent id %q is taken", ErrConflict, a.ID)
	case engine.IsConstraint(err, engine.UniqueAgentLiveProviderSession):
		return fmt.Errorf("%w: a live agent holds session %q of provider %q", ErrConflict, a.ProviderSessionID, a.Provider)
	case engine.IsConstraint(err, engine.UniqueAgentIdempotency):
		return fmt.Errorf("%w: idempotency key %q of owner %q is used", ErrConflict, a.IdempotencyKey, a.OwnerActor)
	case engine.IsUnique(err):
		return fmt.Errorf("%w: agent %q: %v", ErrConflict, a.ID, err)
	case engine.IsConstraint(err, engine.CheckViolation):
		return fmt.Errorf("%w: agent %q breaks a rule of the ledger: %v", ErrInvalidInput, a.ID, err)
	}
	return err
}

func agentRow(a Agent) engine.Agent {
	return engine.Agent{
		ID:                     a.ID,
		State:                  string(a.State),
		TerminalReason:         string(a.TerminalReason),
		Provider:               a.Provider,
		ProviderSessionID:      a.ProviderSessionID,
		CheckpointSessionID:    a.CheckpointSessionID,
		CheckpointCursor:       a.CheckpointCursor,
		OwnerActor:             a.OwnerActor,
		OwnerPeerClass:         a.OwnerPeerClass,
		OwnerWriteNamespace:    a.OwnerWriteNamespace,
		OwnerVisibleNamespaces: a.OwnerVisibleNamespaces,
		SpawnFingerprint:       a.SpawnFingerprint,
		SpawnedAtMs:            a.SpawnedAt.UnixMilli(),
		StateChangedAtMs:       a.StateChangedAt.UnixMilli(),
		IdempotencyKey:         a.IdempotencyKey,
		Host:                   a.Host,
		HolderNamespace:        a.HolderNamespace,
		HolderInstanceID:       a.HolderInstanceID,
	}
}

func agentFromRow(r engine.Agent) Agent {
	return Agent{
		ID:                     r.ID,
		State:                  AgentState(r.State),
		TerminalReason:         TerminalReason(r.TerminalReason),
		Provider:               r.Provider,
		ProviderSessionID:      r.ProviderSessionID,
		CheckpointSessionID:    r.CheckpointSessionID,
		CheckpointCursor:       r.CheckpointCursor,
		OwnerActor:             r.OwnerActor,
		OwnerPeerClass:         r.OwnerPeerClass,
		OwnerWriteNamespace:    r.OwnerWriteNamespace,
		OwnerVisibleNamespaces: r.OwnerVisibleNamespaces,
		SpawnFingerprint:       r.SpawnFingerprint,
		SpawnedAt:              msTime(r.SpawnedAtMs),
		StateChangedAt:         msTime(r.StateChangedAtMs),
		IdempotencyKey:         r.IdempotencyKey,
		Host:                   r.Host,
		HolderNamespace:        r.HolderNamespace,
		HolderInstanceID:       r.HolderInstanceID,
	}
}
