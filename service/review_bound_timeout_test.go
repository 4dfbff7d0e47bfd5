package service

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Review: a Timeout is stored by every create path. the README ("Leases bound
// to their holder, and timeouts": "Timeout bounds a run, bound lease or
// not: a lease of an execution with a Timeout is lost at Deadline"; and the
// batch/unique rules say the rules of CreateExecution hold for every path.
func TestReviewBoundTimeoutStoredByEveryCreatePath(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for _, c := range []struct {
			name   string
			create func(s *Store) (uuid.UUID, error)
		}{
			{"single", func(s *Store) (uuid.UUID, error) {
				return s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Timeout: 5 * time.Second})
			}},
			{"single-unique", func(s *Store) (uuid.UUID, error) {
				return s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", UniqueKey: "k", Timeout: 5 * time.Second})
			}},
			{"single-unique-for", func(s *Store) (uuid.UUID, error) {
				return s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", UniqueKey: "k", UniqueFor: time.Hour, Timeout: 5 * time.Second})
			}},
			{"batch", func(s *Store) (uuid.UUID, error) {
				ids, err := s.CreateExecutions(ctx, []CreateExecutionArgs{{Namespace: "ns", Lane: "default", Timeout: 5 * time.Second}})
				if err != nil {
					return uuid.Nil, err
				}
				return ids[0], nil
			}},
			{"batch-unique", func(s *Store) (uuid.UUID, error) {
				ids, err := s.CreateExecutions(ctx, []CreateExecutionArgs{{Namespace: "ns", Lane: "default", UniqueKey: "k", Timeout: 5 * time.Second}})
				if err != nil {
					return uuid.Nil, err
				}
				return ids[0], nil
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				s, _ := b.newStore(t)
				boundWorker(t, s, "i", t0)
				id, err := c.create(s)
				must(t, err)
				if x := getExecution(t, s, id); x.Timeout != 5*time.Second {
					t.Errorf("stored Timeout = %v, want 5s", x.Timeout)
				}
				l := claimBound(t, s, "i", t0)
				if !l.Deadline.Equal(t0.Add(5 * time.Second)) {
					t.Errorf("claimed lease Deadline = %v, want t0+5s (the run's Timeout is lost)", l.Deadline)
				}
			})
		}
	})
}
