package service

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// ListExecutions finds a namespace's executions by unique key (finished ones
// too: a key used again lists each execution that held it) or by group, in
// either order, page by page, with the other filters applied; a key or a
// group needs its namespace.
func TestListExecutionsByUniqueKeyAndGroup(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		ctx := context.Background()
		worker(t, s, "ns", "i", []string{"x"}, nil)
		first := create(t, s, CreateExecutionArgs{Lane: "x", UniqueKey: "order-42", Now: t0})
		l := claim(t, s, "i", t0)
		if l.ExecutionID != first {
			t.Fatalf("claimed %s, want %s", l.ExecutionID, first)
		}
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0}))
		again := create(t, s, CreateExecutionArgs{Lane: "y", UniqueKey: "order-42", Now: t0.Add(time.Second)})
		create(t, s, CreateExecutionArgs{Namespace: "other", Lane: "x", UniqueKey: "order-42", Now: t0})
		create(t, s, CreateExecutionArgs{Lane: "x", UniqueKey: "order-43", Now: t0})
		var group []uuid.UUID
		for i := range 3 {
			lane := []string{"x", "y", "x"}[i]
			group = append(group, create(t, s, CreateExecutionArgs{Lane: lane, Group: "tenant-1", Now: t0.Add(time.Duration(i) * time.Second)}))
		}
		create(t, s, CreateExecutionArgs{Namespace: "other", Lane: "x", Group: "tenant-1", Now: t0})
		create(t, s, CreateExecutionArgs{Lane: "x", Group: "tenant-2", Now: t0})
		list := func(a ListExecutionsArgs) []uuid.UUID {
			t.Helper()
			var ids []uuid.UUID
			for {
				page, err := s.ListExecutions(ctx, a)
				must(t, err)
				for _, e := range page.Executions {
					if (a.UniqueKey != "" && e.UniqueKey != a.UniqueKey) || (a.Group != "" && e.Group != a.Group) || e.Namespace != a.Namespace {
						t.Fatalf("%+v listed %+v", a, e)
					}
					ids = append(ids, e.ID)
				}
				if page.Next == "" {
					return ids
				}
				a.After = page.Next
			}
		}
		reversed := func(ids []uuid.UUID) []uuid.UUID {
			out := slices.Clone(ids)
			slices.Reverse(out)
			return out
		}
		for _, tc := range []struct {
			name string
			a    ListExecutionsArgs
			want []uuid.UUID
		}{
			{"key", ListExecutionsArgs{Namespace: "ns", UniqueKey: "order-42"}, []uuid.UUID{first, again}},
			{"key, page by page", ListExecutionsArgs{Namespace: "ns", UniqueKey: "order-42", Limit: 1}, []uuid.UUID{first, again}},
			{"key, newest first", ListExecutionsArgs{Namespace: "ns", UniqueKey: "order-42", Limit: 1, NewestFirst: true}, []uuid.UUID{again, first}},
			{"key, completed", ListExecutionsArgs{Namespace: "ns", UniqueKey: "order-42", State: ExecutionCompleted}, []uuid.UUID{first}},
			{"key, lane", ListExecutionsArgs{Namespace: "ns", UniqueKey: "order-42", Lane: "y"}, []uuid.UUID{again}},
			{"key unknown", ListExecutionsArgs{Namespace: "ns", UniqueKey: "order-44"}, nil},
			{"group", ListExecutionsArgs{Namespace: "ns", Group: "tenant-1"}, group},
			{"group, newest first", ListExecutionsArgs{Namespace: "ns", Group: "tenant-1", Limit: 2, NewestFirst: true}, reversed(group)},
			{"group, lane", ListExecutionsArgs{Namespace: "ns", Group: "tenant-1", Lane: "x"}, []uuid.UUID{group[0], group[2]}},
			{"group, waiting", ListExecutionsArgs{Namespace: "ns", Group: "tenant-1", State: ExecutionWaiting, Limit: 1}, group},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if got := list(tc.a); !slices.Equal(got, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
		for _, a := range []ListExecutionsArgs{{UniqueKey: "order-42"}, {Group: "tenant-1"}, {Namespace: "ns", UniqueKey: "a\nkey"}, {Namespace: "ns", Group: "a\tgroup"},
			{Namespace: "ns", UniqueKey: "order-42", Group: "tenant-1"}} {
			_, err := s.ListExecutions(ctx, a)
			wantErr(t, err, ErrInvalidInput)
		}
	})
}
