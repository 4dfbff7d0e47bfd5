package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/engine"
)

// AttemptOutcome is how an attempt ended, or "running".
type AttemptOutcome string

// The outcomes of an attempt.
const (
	AttemptRunning   AttemptOutcome = "running"   // the current attempt
	AttemptCompleted AttemptOutcome = "completed" // its handler's result completed the execution
	AttemptFailed    AttemptOutcome = "failed"    // failed with a reason
	AttemptLost      AttemptOutcome = "lost"      // its lease expired and was reclaimed, or its holder was marked dead or swept (from then)
	AttemptTimedOut  AttemptOutcome = "timed_out" // its execution's Timeout ended it
	AttemptReleased  AttemptOutcome = "released"  // given back unstarted (ReleaseLease): no attempt used up
	AttemptSnoozed   AttemptOutcome = "snoozed"   // given back for later (SnoozeLease, Snooze): no attempt used up
	AttemptCancelled AttemptOutcome = "cancelled" // its execution was cancelled while it ran
)

// Attempt is one attempt of an execution: one claim and how it ended.
type Attempt struct {
	ExecutionID        uuid.UUID
	Index              int   // its place in the history: 1, 2, 3, ... (every claim adds one)
	Epoch              int64 // the epoch of its lease
	InstanceID         string
	StartedAt, EndedAt time.Time // EndedAt zero while running
	Outcome            AttemptOutcome
	Error              string // the fail reason, "lease expired", "timed out" or the cancel reason
}

// ListAttempts returns every attempt of an execution, oldest first: the
// ended ones with their outcome and the current one running. An attempt
// whose holder was marked dead or swept is lost from that moment (ended
// then, "lease expired"), before its reclaim as after it; one whose lease
// merely expired lists running until the reclaim ends it. An unknown
// execution is ErrNotFound. The history is pruned with its execution.
func (s *Store) ListAttempts(ctx context.Context, executionID uuid.UUID) ([]Attempt, error) {
	if err := s.notClosed(); err != nil {
		return nil, err
	}
	var rows []engine.Attempt
	err := s.snapshot(ctx, func(ctx context.Context, q engine.Queries) error {
		if _, err := q.ExecutionGetState(ctx, executionID); err != nil {
			if errors.Is(err, engine.ErrNoRows) {
				return fmt.Errorf("%w: execution %s", ErrNotFound, executionID)
			}
			return err
		}
		var err error
		rows, err = q.AttemptList(ctx, executionID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = Attempt{
			ExecutionID: executionID,
			Index:       i + 1,
			Epoch:       r.Epoch,
			InstanceID:  r.InstanceID,
			StartedAt:   msTime(r.ClaimedAtMs),
			EndedAt:     optionalTime(r.EndedAtMs),
			Outcome:     attemptOutcome(r.State, r.Error),
			Error:       r.Error,
		}
		switch {
		case out[i].Outcome == AttemptRunning:
			out[i].EndedAt = time.Time{}
		case out[i].Outcome == AttemptLost && out[i].Error == "":
			out[i].Error = "lease expired" // recorded before attempts kept their errors
		}
	}
	return out, nil
}

// attemptOutcome names a stored attempt state as an outcome: a reclaimed
// attempt timed out when its lease ended at its deadline (the reclaim
// recorded "timed out"), else it was lost.
func attemptOutcome(state, reason string) AttemptOutcome {
	switch {
	case state == "reclaimed" && reason == timedOut:
		return AttemptTimedOut
	case state == "reclaimed":
		return AttemptLost
	}
	return AttemptOutcome(state)
}

// timedOut is the LastError (and the attempt's error) of an execution
// reclaimed because its lease reached its deadline.
const timedOut = "timed out"
