package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
)

// TestMetadataValidation: the limits of Metadata, each refusal
// ErrInvalidInput naming the key (or the field), nothing written, in a
// single create and in a batch (naming the item).
func TestMetadataValidation(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		many := map[string]string{}
		for i := range 65 {
			many[fmt.Sprintf("k%02d", i)] = "v"
		}
		big := map[string]string{}
		for i := range 5 {
			big[fmt.Sprintf("k%d", i)] = strings.Repeat("x", 4000) // 20,000 bytes in all
		}
		sixtyFour := map[string]string{}
		for i := range 64 {
			sixtyFour[fmt.Sprintf("k%02d", i)] = strings.Repeat("y", 250) // 64 entries, 16,192 bytes
		}
		for _, tc := range []struct {
			name string
			m    map[string]string
			want string // in the error; "" accepted
		}{
			{"nil", nil, ""},
			{"empty", map[string]string{}, ""},
			{"sixty-four entries within 16 KiB", sixtyFour, ""},
			{"a value of 4 KiB", map[string]string{"k": strings.Repeat("é", 2048)}, ""},
			{"control characters in a value", map[string]string{"k": "a\nb\x00c"}, ""},
			{"empty value", map[string]string{"k": ""}, ""},
			{"65 entries", many, "Metadata: 65 entries"},
			{"empty key", map[string]string{"": "v"}, `Metadata[""] key`},
			{"key with a control character", map[string]string{"a\tb": "v"}, `Metadata["a\tb"] key`},
			{"key too long", map[string]string{strings.Repeat("k", 257): "v"}, `Metadata["` + strings.Repeat("k", 257) + `"] key: 257 bytes`},
			{"value too long", map[string]string{"trace": strings.Repeat("x", 4097)}, `Metadata["trace"]: value of 4097 bytes`},
			{"value not UTF-8", map[string]string{"bad": "\xff"}, `Metadata["bad"]: value is not valid UTF-8`},
			{"over 16 KiB in all", big, `Metadata["k4"]: keys and values exceed`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				id, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "l", Metadata: tc.m})
				if tc.want == "" {
					must(t, err)
					e, err := s.GetExecution(ctx, id)
					must(t, err)
					if len(tc.m) == 0 && e.Metadata != nil {
						t.Fatalf("metadata %v, want nil", e.Metadata)
					}
					if len(tc.m) > 0 && !maps.Equal(e.Metadata, tc.m) {
						t.Fatalf("metadata read back differs")
					}
					return
				}
				if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want ErrInvalidInput with %q", err, tc.want)
				}
				_, err = s.CreateExecutions(ctx, []CreateExecutionArgs{{Namespace: "ns", Lane: "l"}, {Namespace: "ns", Lane: "l", Metadata: tc.m}})
				if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "[1]."+tc.want) {
					t.Fatalf("batch: err = %v, want ErrInvalidInput with %q", err, "[1]."+tc.want)
				}
			})
		}
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{})
		must(t, err)
		if len(page.Executions) != 6 {
			t.Fatalf("%d executions written, want the 6 accepted", len(page.Executions))
		}
	})
}

// TestMetadataCarried: Metadata is stored with the execution (GetExecution,
// ListExecutions, batch creates, unique creates), handed to every Lease of
// it (ClaimExecution, ClaimExecutions, RunWorker's handler), and survives a
// failed attempt, a reclaim and a redrive; the caller's map is not shared.
func TestMetadataCarried(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "a", []string{"default"}, nil)
		md := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "who": "ünïcode"}
		id := create(t, s, CreateExecutionArgs{MaxAttempts: 2, Metadata: md, Now: t0})
		md["who"] = "changed after the create"
		want := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "who": "ünïcode"}
		check := func(what string, got map[string]string) {
			t.Helper()
			if !maps.Equal(got, want) {
				t.Fatalf("%s: metadata %v, want %v", what, got, want)
			}
		}
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		check("get", e.Metadata)
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: "ns"})
		must(t, err)
		check("list", page.Executions[0].Metadata)

		l := claim(t, s, "a", t0.Add(time.Second))
		check("claim", l.Metadata)
		must(t, s.FailExecution(ctx, FailArgs{Lease: l, Reason: "again", Now: t0.Add(2 * time.Second)}))
		ls, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: "a", LeaseTTL: time.Second, Now: t0.Add(3 * time.Second)}, 10)
		must(t, err)
		check("retry's batch claim", ls[0].Metadata)
		if _, err := s.ReclaimExpiredLeases(ctx, t0.Add(10*time.Second), 0); err != nil {
			t.Fatal(err)
		}
		must(t, s.RetryExecution(ctx, RetryExecutionArgs{ID: id, Now: t0.Add(10 * time.Second)}))
		l = claim(t, s, "a", t0.Add(11*time.Second))
		check("redrive's claim", l.Metadata)
		must(t, s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0.Add(12 * time.Second)}))
		e, err = s.GetExecution(ctx, id)
		must(t, err)
		check("completed", e.Metadata)

		ids, err := s.CreateExecutions(ctx, []CreateExecutionArgs{
			{Namespace: "ns", Lane: "default", Metadata: want, Now: t0},
			{Namespace: "ns", Lane: "default", Now: t0},
			{Namespace: "ns", Lane: "default", UniqueKey: "k", Metadata: want, Now: t0},
		})
		must(t, err)
		for i, id := range ids {
			e, err := s.GetExecution(ctx, id)
			must(t, err)
			if i == 1 {
				if e.Metadata != nil {
					t.Fatalf("an item without metadata has %v", e.Metadata)
				}
				continue
			}
			check(fmt.Sprintf("batch item %d", i), e.Metadata)
		}
		keyed := create(t, s, CreateExecutionArgs{UniqueKey: "k2", Metadata: want, Now: t0})
		e, err = s.GetExecution(ctx, keyed)
		must(t, err)
		check("unique create", e.Metadata)
	})
}

// TestMetadataThroughRunWorker: the runtime's claims (in its settle
// batches) hand the handler the execution's Metadata.
func TestMetadataThroughRunWorker(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := realStore(t, b)
		got := make(chan map[string]string, 10)
		stop := runWorker(t, s, WorkerArgs{
			Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"default"}, LeaseTTL: 10 * time.Second, Concurrency: 2,
			Handler: func(ctx context.Context, l Lease) ([]byte, error) { got <- l.Metadata; return nil, nil },
		})
		defer func() { must(t, stop()) }()
		for i := range 4 {
			_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "default", Metadata: map[string]string{"n": fmt.Sprint(i)}})
			must(t, err)
		}
		seen := map[string]bool{}
		for range 4 {
			select {
			case m := <-got:
				seen[m["n"]] = true
			case <-time.After(20 * time.Second):
				t.Fatal("a handler never ran")
			}
		}
		if len(seen) != 4 {
			t.Fatalf("handlers saw %v", seen)
		}
	})
}
