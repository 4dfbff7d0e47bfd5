package service

import (
	"context"
	"strings"
	"testing"
)

// Agents bound to a worker registration are not granted by this version: a
// holder is ErrInvalidInput naming the field, nothing written; clearing a
// holder that cannot be set is a no-op for a live agent.
func TestAgentHoldersAreRefused(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		a := agent("held")
		a.HolderNamespace, a.HolderInstanceID = "ns", "i"
		err := s.InsertAgent(ctx, a)
		wantErr(t, err, ErrInvalidInput)
		if !strings.Contains(err.Error(), "HolderNamespace") {
			t.Errorf("InsertAgent with a holder: %v", err)
		}
		_, err = s.GetAgent(ctx, "held")
		wantErr(t, err, ErrNotFound)
		live := agent("live")
		must(t, s.InsertAgent(ctx, live))
		wantErr(t, s.SetAgentHolder(ctx, "live", "", "i"), ErrInvalidInput)
		must(t, s.SetAgentHolder(ctx, "live", "", ""))
		wantErr(t, s.SetAgentHolder(ctx, "nobody", "", ""), ErrNotFound)
		must(t, s.UpdateAgentState(ctx, UpdateAgentStateArgs{ID: "live", State: AgentTerminal, Reason: ReasonKilled}))
		wantErr(t, s.SetAgentHolder(ctx, "live", "", ""), ErrInvalidTransition)
	})
}
