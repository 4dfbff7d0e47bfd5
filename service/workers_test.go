package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func register(t testing.TB, s *Store, ns, inst, worker string, ttl time.Duration, now time.Time) RegisterOutcome {
	t.Helper()
	out, err := s.RegisterWorker(context.Background(), RegisterWorkerArgs{
		Namespace: ns, WorkerID: worker, InstanceID: inst, TTL: ttl, Now: now,
	})
	if err != nil {
		t.Fatalf("RegisterWorker(%s/%s): %v", ns, inst, err)
	}
	return out
}

func TestRegisterOutcomes(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ttl := 10 * time.Second
		for _, tc := range []struct {
			name           string
			secondAt       time.Duration // after the first registration at t0
			secondWorker   string
			want           RegisterOutcome
			wantErr        error
			wantRegistered time.Time
		}{
			{name: "alive, same worker id", secondAt: 5 * time.Second, secondWorker: "w1", want: Refreshed, wantRegistered: t0},
			{name: "alive one ms before expiry", secondAt: ttl - time.Millisecond, secondWorker: "w1", want: Refreshed, wantRegistered: t0},
			{name: "lapsed at expiry, unswept", secondAt: ttl, secondWorker: "w1", want: Registered, wantRegistered: t0.Add(ttl)},
			{name: "lapsed long ago, unswept", secondAt: time.Hour, secondWorker: "w1", want: Registered, wantRegistered: t0.Add(time.Hour)},
			{name: "alive under another worker id", secondAt: time.Second, secondWorker: "w2", wantErr: ErrConflict, wantRegistered: t0},
			{name: "reassigned after lapse", secondAt: ttl, secondWorker: "w2", want: Registered, wantRegistered: t0.Add(ttl)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := b.newStore(t)
				ctx := context.Background()
				if out := register(t, s, "ns", "i", "w1", ttl, t0); out != Registered {
					t.Fatalf("first registration: %v", out)
				}
				out, err := s.RegisterWorker(ctx, RegisterWorkerArgs{
					Namespace: "ns", WorkerID: tc.secondWorker, InstanceID: "i",
					Lanes: []string{"new"}, TTL: 2 * ttl, Now: t0.Add(tc.secondAt),
				})
				if tc.wantErr != nil {
					wantErr(t, err, tc.wantErr)
				} else if err != nil || out != tc.want {
					t.Fatalf("second registration = %v, %v; want %v", out, err, tc.want)
				}
				w, err := s.GetWorker(ctx, "ns", "i")
				must(t, err)
				if !w.RegisteredAt.Equal(tc.wantRegistered) {
					t.Fatalf("RegisteredAt = %v, want %v", w.RegisteredAt, tc.wantRegistered)
				}
				if tc.wantErr != nil {
					// Nothing changed.
					if w.WorkerID != "w1" || w.Lanes != nil || w.TTL != ttl || !w.LastHeartbeat.Equal(t0) {
						t.Fatalf("refused registration changed the row: %+v", w)
					}
					return
				}
				if w.WorkerID != tc.secondWorker || !slices.Equal(w.Lanes, []string{"new"}) || w.TTL != 2*ttl ||
					!w.LastHeartbeat.Equal(t0.Add(tc.secondAt)) {
					t.Fatalf("registration did not replace the row: %+v", w)
				}
			})
		}
	})
}

func TestHeartbeatBoundary(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ttl := 10 * time.Second
		for _, tc := range []struct {
			name string
			at   time.Duration
			ok   bool
		}{
			{"well before expiry", time.Second, true},
			{"one ms before expiry", ttl - time.Millisecond, true},
			{"at expiry", ttl, false},
			{"after expiry", ttl + time.Millisecond, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := b.newStore(t)
				ctx := context.Background()
				register(t, s, "ns", "i", "w", ttl, t0)
				next, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i", Now: t0.Add(tc.at)})
				w, gerr := s.GetWorker(ctx, "ns", "i")
				must(t, gerr)
				events, eerr := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{})
				must(t, eerr)
				if !tc.ok {
					wantErr(t, err, ErrNotRegistered)
					if !w.LastHeartbeat.Equal(t0) || len(events) != 1 {
						t.Fatalf("refused heartbeat changed something: %+v, %d events", w, len(events))
					}
					return
				}
				must(t, err)
				if want := t0.Add(tc.at + ttl); !next.Equal(want) || !w.ExpiresAt().Equal(want) {
					t.Fatalf("next expiry %v (row %v), want %v", next, w.ExpiresAt(), want)
				}
				if len(events) != 2 || events[1].Kind != EventHeartbeat || !events[1].At.Equal(t0.Add(tc.at)) {
					t.Fatalf("events = %+v", events)
				}
			})
		}
		t.Run("absent", func(t *testing.T) {
			s, _ := b.newStore(t)
			_, err := s.HeartbeatWorker(context.Background(), HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "nobody"})
			wantErr(t, err, ErrNotRegistered)
		})
	})
}

func TestSweepBoundary(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		register(t, s, "ns", "short", "w", 10*time.Second, t0)
		register(t, s, "ns", "long", "w", 20*time.Second, t0)

		n, err := s.SweepExpiredWorkers(ctx, t0.Add(10*time.Second-time.Millisecond))
		must(t, err)
		if n != 0 {
			t.Fatalf("swept %d alive workers", n)
		}
		n, err = s.SweepExpiredWorkers(ctx, t0.Add(10*time.Second)) // exactly hb+ttl
		must(t, err)
		if n != 1 {
			t.Fatalf("swept %d at hb+ttl, want 1", n)
		}
		if _, err := s.GetWorker(ctx, "ns", "short"); !errors.Is(err, ErrNotRegistered) {
			t.Fatalf("swept worker still there: %v", err)
		}
		if _, err := s.GetWorker(ctx, "ns", "long"); err != nil {
			t.Fatalf("alive worker swept: %v", err)
		}
		events, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{InstanceID: "short", Namespace: "ns"})
		must(t, err)
		if len(events) != 2 || events[1].Kind != EventTTLSwept || !events[1].At.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("events = %+v", events)
		}
	})
}

func TestSweepManyInBatches(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		const n = 3000
		for i := range n {
			register(t, s, fmt.Sprintf("ns%d", i%3), fmt.Sprintf("i%05d", i), "w", time.Duration(1+i%7)*time.Second, t0)
		}
		register(t, s, "ns0", "survivor", "w", time.Hour, t0)
		swept, err := s.SweepExpiredWorkers(ctx, t0.Add(time.Minute))
		must(t, err)
		if swept != n {
			t.Fatalf("swept %d, want %d", swept, n)
		}
		page, err := s.ListWorkers(ctx, ListWorkersArgs{})
		must(t, err)
		if len(page.Workers) != 1 || page.Workers[0].InstanceID != "survivor" {
			t.Fatalf("left %d workers", len(page.Workers))
		}
		events, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{AfterSeq: n + 1, Limit: maxLimit})
		must(t, err)
		if len(events) != n {
			t.Fatalf("%d ttl_swept events, want %d", len(events), n)
		}
		seen := map[string]bool{}
		for _, e := range events {
			if e.Kind != EventTTLSwept || seen[e.Namespace+"/"+e.InstanceID] {
				t.Fatalf("bad or duplicate event %+v", e)
			}
			seen[e.Namespace+"/"+e.InstanceID] = true
		}
	})
}

func TestMarkWorkerDead(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for _, tc := range []struct {
			name   string
			reason string
			at     time.Duration
			err    error
		}{
			{name: "alive", reason: "shutdown", at: time.Second},
			{name: "lapsed", reason: "crashed", at: time.Hour},
			{name: "multibyte reason at the limit", reason: strings.Repeat("é", 128), at: time.Second},
			{name: "empty reason", reason: "", at: time.Second},
			{name: "reason one byte over", reason: strings.Repeat("é", 128) + "x", err: ErrInvalidInput},
			{name: "reason with a newline", reason: "a\nb", err: ErrInvalidInput},
			{name: "reason with invalid UTF-8", reason: "a\xffb", err: ErrInvalidInput},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := b.newStore(t)
				register(t, s, "ns", "i", "w", time.Minute, t0)
				err := s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Reason: tc.reason, Now: t0.Add(tc.at)})
				events, eerr := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{})
				must(t, eerr)
				if tc.err != nil {
					wantErr(t, err, tc.err)
					if _, err := s.GetWorker(ctx, "ns", "i"); err != nil || len(events) != 1 {
						t.Fatalf("refused mark-dead changed something: %v, %d events", err, len(events))
					}
					return
				}
				must(t, err)
				if _, err := s.GetWorker(ctx, "ns", "i"); !errors.Is(err, ErrNotRegistered) {
					t.Fatalf("worker still registered: %v", err)
				}
				last := events[len(events)-1]
				if last.Kind != EventMarkedDead || last.Reason != tc.reason || !last.At.Equal(t0.Add(tc.at)) {
					t.Fatalf("event = %+v", last)
				}
				wantErr(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i"}), ErrNotRegistered)
			})
		}
	})
}

func TestNamespaceIsolation(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		register(t, s, "a", "same", "wa", time.Minute, t0)
		register(t, s, "b", "same", "wb", time.Minute, t0) // same instance id, other namespace: no conflict
		wa, err := s.GetWorker(ctx, "a", "same")
		must(t, err)
		wb, err := s.GetWorker(ctx, "b", "same")
		must(t, err)
		if wa.WorkerID != "wa" || wb.WorkerID != "wb" {
			t.Fatalf("workers mixed: %+v %+v", wa, wb)
		}
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "a", InstanceID: "same"}))
		if _, err := s.GetWorker(ctx, "b", "same"); err != nil {
			t.Fatalf("marking a/same dead touched b/same: %v", err)
		}
		page, err := s.ListWorkers(ctx, ListWorkersArgs{Namespace: "a"})
		must(t, err)
		if len(page.Workers) != 0 {
			t.Fatalf("namespace a lists %+v", page.Workers)
		}
		events, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{Namespace: "b"})
		must(t, err)
		for _, e := range events {
			if e.Namespace != "b" {
				t.Fatalf("namespace b sees event %+v", e)
			}
		}
		events, err = s.ListWorkerEvents(ctx, ListWorkerEventsArgs{InstanceID: "same", Namespace: "a"})
		must(t, err)
		if len(events) != 2 {
			t.Fatalf("a/same has %d events, want 2", len(events))
		}
		events, err = s.ListWorkerEvents(ctx, ListWorkerEventsArgs{InstanceID: "same"})
		must(t, err)
		if len(events) != 3 {
			t.Fatalf("instance 'same' in every namespace has %d events, want 3", len(events))
		}
	})
}

// collectWorkers pages through ListWorkers and checks the Next rule.
func collectWorkers(t *testing.T, s *Store, ns string, limit int) ([]string, int) {
	t.Helper()
	var keys []string
	pages := 0
	after := ""
	for {
		page, err := s.ListWorkers(context.Background(), ListWorkersArgs{Namespace: ns, After: after, Limit: limit})
		must(t, err)
		pages++
		for _, w := range page.Workers {
			keys = append(keys, w.Namespace+"/"+w.InstanceID)
		}
		if page.Next == "" {
			return keys, pages
		}
		if len(page.Workers) != limit {
			t.Fatalf("page of %d with a Next cursor", len(page.Workers))
		}
		after = page.Next
	}
}

func TestListWorkersPaging(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		var all []string
		for _, ns := range []string{"a", "b", "c"} {
			for i := range 4 {
				inst := fmt.Sprintf("i%d", i)
				register(t, s, ns, inst, "w", time.Minute, t0)
				all = append(all, ns+"/"+inst)
			}
		}
		for _, tc := range []struct {
			ns        string
			limit     int
			wantPages int
			want      []string
		}{
			{"", 4, 3, all},  // exactly full last page: no empty extra page
			{"", 5, 3, all},  // partial last page
			{"", 12, 1, all}, // one exactly full page
			{"", 0, 1, all},  // default limit
			{"b", 2, 2, all[4:8]},
			{"b", 4, 1, all[4:8]},
			{"b", 3, 2, all[4:8]},
			{"zzz", 3, 1, nil},
		} {
			t.Run(fmt.Sprintf("ns=%q limit=%d", tc.ns, tc.limit), func(t *testing.T) {
				got, pages := collectWorkers(t, s, tc.ns, tc.limit)
				if !slices.Equal(got, tc.want) || pages != tc.wantPages {
					t.Fatalf("got %v in %d pages, want %v in %d", got, pages, tc.want, tc.wantPages)
				}
			})
		}
		t.Run("limit over max is clamped", func(t *testing.T) {
			page, err := s.ListWorkers(context.Background(), ListWorkersArgs{Limit: maxLimit + 1})
			must(t, err)
			if len(page.Workers) != len(all) || page.Next != "" {
				t.Fatalf("%d workers, next %q", len(page.Workers), page.Next)
			}
		})
	})
}

func TestWorkerInputValidation(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		long := strings.Repeat("x", 257)
		good := RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: time.Second}
		cases := map[string]func(a *RegisterWorkerArgs){
			"empty namespace":       func(a *RegisterWorkerArgs) { a.Namespace = "" },
			"long namespace":        func(a *RegisterWorkerArgs) { a.Namespace = long },
			"control in worker id":  func(a *RegisterWorkerArgs) { a.WorkerID = "w\x00" },
			"bad UTF-8 instance id": func(a *RegisterWorkerArgs) { a.InstanceID = "\xc3" },
			"empty lane":            func(a *RegisterWorkerArgs) { a.Lanes = []string{"a", ""} },
			"tab in capability":     func(a *RegisterWorkerArgs) { a.Capabilities = []string{"gpu\t"} },
			"zero TTL":              func(a *RegisterWorkerArgs) { a.TTL = 0 },
			"sub-ms TTL":            func(a *RegisterWorkerArgs) { a.TTL = time.Millisecond - 1 },
			"TTL over 30 days":      func(a *RegisterWorkerArgs) { a.TTL = 30*24*time.Hour + time.Millisecond },
		}
		for name, mutate := range cases {
			t.Run(name, func(t *testing.T) {
				a := good
				mutate(&a)
				_, err := s.RegisterWorker(ctx, a)
				wantErr(t, err, ErrInvalidInput)
			})
		}
		for name, ttl := range map[string]time.Duration{"1ms": time.Millisecond, "30 days": 30 * 24 * time.Hour} {
			t.Run("TTL bound "+name, func(t *testing.T) {
				a := good
				a.TTL = ttl
				a.InstanceID = name
				_, err := s.RegisterWorker(ctx, a)
				must(t, err)
			})
		}
		page, err := s.ListWorkers(ctx, ListWorkersArgs{})
		must(t, err)
		if len(page.Workers) != 2 {
			t.Fatalf("%d workers written, want only the 2 valid ones", len(page.Workers))
		}
		events, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{})
		must(t, err)
		if len(events) != 2 {
			t.Fatalf("%d events written, want 2", len(events))
		}
		for name, call := range map[string]func() error{
			"negative limit": func() error { _, err := s.ListWorkers(ctx, ListWorkersArgs{Limit: -1}); return err },
			"garbage cursor": func() error { _, err := s.ListWorkers(ctx, ListWorkersArgs{After: "!!"}); return err },
			"base64 garbage": func() error { _, err := s.ListWorkers(ctx, ListWorkersArgs{After: "e30"}); return err },
			"foreign cursor": func() error {
				_, err := s.ListWorkers(ctx, ListWorkersArgs{After: encodeCursor("agents", "x")})
				return err
			},
			"cursor of another namespace": func() error {
				_, err := s.ListWorkers(ctx, ListWorkersArgs{Namespace: "b", After: encodeCursor(workersCursor, "a", "x")})
				return err
			},
			"bad namespace filter": func() error { _, err := s.ListWorkers(ctx, ListWorkersArgs{Namespace: long}); return err },
			"negative AfterSeq": func() error {
				_, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{AfterSeq: -1})
				return err
			},
			"negative event limit": func() error {
				_, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{Limit: -1})
				return err
			},
			"get with empty namespace": func() error { _, err := s.GetWorker(ctx, "", "i"); return err },
			"heartbeat bad instance": func() error {
				_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "\n"})
				return err
			},
		} {
			t.Run(name, func(t *testing.T) { wantErr(t, call(), ErrInvalidInput) })
		}
	})
}

func TestLanesRoundTrip(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		lanes := []string{"b,c", "a", "b,c", "ünïcødé", `quote"s`, "[json]", "a"}
		caps := []string{"gpu,a100", "<html>&"}
		_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: lanes, Capabilities: caps, TTL: time.Minute})
		must(t, err)
		w, err := s.GetWorker(ctx, "ns", "i")
		must(t, err)
		wantLanes := []string{"[json]", "a", "b,c", `quote"s`, "ünïcødé"}
		if !slices.Equal(w.Lanes, wantLanes) || !slices.Equal(w.Capabilities, []string{"<html>&", "gpu,a100"}) {
			t.Fatalf("lanes %q caps %q", w.Lanes, w.Capabilities)
		}
		if lanes[0] != "b,c" {
			t.Fatal("RegisterWorker reordered the caller's slice")
		}
	})
}

func TestStoreClockAndTruncation(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, clock := b.newStore(t)
		clock.Advance(1234567 * time.Nanosecond) // 1.234567 ms
		_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: "i", TTL: 1500 * time.Microsecond})
		must(t, err)
		w, err := s.GetWorker(ctx, "ns", "i")
		must(t, err)
		want := t0.Add(time.Millisecond)
		if !w.LastHeartbeat.Equal(want) || w.LastHeartbeat.Location() != time.UTC || !w.RegisteredAt.Equal(want) {
			t.Fatalf("LastHeartbeat %v (%v), want %v UTC", w.LastHeartbeat, w.LastHeartbeat.Location(), want)
		}
		if w.TTL != time.Millisecond {
			t.Fatalf("TTL %v, want 1ms (truncated)", w.TTL)
		}
		// A non-UTC Now is stored as the same instant and read back in UTC.
		local := time.FixedZone("X", 3*3600)
		next, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i", Now: want.In(local).Add(999 * time.Microsecond)})
		must(t, err)
		if !next.Equal(want.Add(time.Millisecond)) || next.Location() != time.UTC {
			t.Fatalf("next expiry %v", next)
		}
	})
}

func TestWorkerEvents(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		register(t, s, "a", "i1", "w", time.Minute, t0)
		register(t, s, "b", "i1", "w", time.Minute, t0.Add(time.Second))
		_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "a", InstanceID: "i1", Now: t0.Add(2 * time.Second)})
		must(t, err)
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "a", InstanceID: "i1", Reason: "bye", Now: t0.Add(3 * time.Second)}))
		register(t, s, "a", "i2", "w", time.Minute, t0.Add(4*time.Second))

		all, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{})
		must(t, err)
		kinds := []WorkerEventKind{EventRegistered, EventRegistered, EventHeartbeat, EventMarkedDead, EventRegistered}
		if len(all) != len(kinds) {
			t.Fatalf("%d events", len(all))
		}
		for i, e := range all {
			if e.Kind != kinds[i] || (i > 0 && e.Seq <= all[i-1].Seq) || !e.At.Equal(t0.Add(time.Duration(i)*time.Second)) {
				t.Fatalf("event %d = %+v", i, e)
			}
		}
		for i, e := range all {
			if e.Kind == EventRegistered && e.Reason != "" {
				t.Fatalf("event %d, a new registration, has reason %q", i, e.Reason)
			}
		}
		// Tail by Seq with a limit.
		tail, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{AfterSeq: all[1].Seq, Limit: 2})
		must(t, err)
		if len(tail) != 2 || tail[0].Seq != all[2].Seq || tail[1].Seq != all[3].Seq {
			t.Fatalf("tail = %+v", tail)
		}
		byNS, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{Namespace: "a", AfterSeq: all[0].Seq})
		must(t, err)
		if len(byNS) != 3 || byNS[0].Kind != EventHeartbeat {
			t.Fatalf("namespace a after first = %+v", byNS)
		}

		// Prune: At < before is deleted; Seq keeps increasing after a full prune.
		pruned, err := s.PruneWorkerEvents(ctx, t0.Add(2*time.Second))
		must(t, err)
		if pruned != 2 {
			t.Fatalf("pruned %d, want 2", pruned)
		}
		pruned, err = s.PruneWorkerEvents(ctx, t0.Add(time.Hour))
		must(t, err)
		if pruned != 3 {
			t.Fatalf("pruned %d, want 3", pruned)
		}
		register(t, s, "a", "i3", "w", time.Minute, t0.Add(5*time.Second))
		after, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{})
		must(t, err)
		if len(after) != 1 || after[0].Seq <= all[len(all)-1].Seq {
			t.Fatalf("after prune: %+v (last seq before %d)", after, all[len(all)-1].Seq)
		}
		// A refresh of a live registration is told apart from a new one.
		register(t, s, "a", "i3", "w", time.Minute, t0.Add(6*time.Second))
		refresh, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{AfterSeq: after[0].Seq})
		must(t, err)
		if len(refresh) != 1 || refresh[0].Kind != EventRegistered || refresh[0].Reason != RefreshedReason {
			t.Fatalf("the refresh's event: %+v", refresh)
		}
	})
}

func TestTwoStoresOneDatabase(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		var stores [2]*Store
		for i := range stores {
			stores[i], _ = b.open(t, loc, WithBusyTimeout(10*time.Second))
		}
		var wg sync.WaitGroup
		errs := make(chan error, 400)
		for i, s := range stores {
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range 25 {
						inst := fmt.Sprintf("s%d-g%d-%d", i, g, k)
						if _, err := s.RegisterWorker(ctx, RegisterWorkerArgs{Namespace: "ns", WorkerID: "w", InstanceID: inst, TTL: time.Hour}); err != nil {
							errs <- err
						}
						if _, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: inst}); err != nil {
							errs <- err
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("concurrent write from two Stores: %v", err)
		}
		page, err := stores[0].ListWorkers(ctx, ListWorkersArgs{})
		must(t, err)
		if len(page.Workers) != 200 {
			t.Fatalf("%d workers, want 200", len(page.Workers))
		}
	})
}

func TestHeartbeatEventsOff(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t, WithHeartbeatEvents(false))
		register(t, s, "ns", "i", "w", time.Minute, t0)
		for k := range 3 {
			_, err := s.HeartbeatWorker(ctx, HeartbeatWorkerArgs{Namespace: "ns", InstanceID: "i", Now: t0.Add(time.Duration(k+1) * time.Second)})
			must(t, err)
		}
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "i", Now: t0.Add(5 * time.Second)}))
		events, err := s.ListWorkerEvents(ctx, ListWorkerEventsArgs{})
		must(t, err)
		if len(events) != 2 || events[0].Kind != EventRegistered || events[1].Kind != EventMarkedDead {
			t.Fatalf("events = %+v, want registered and marked_dead only", events)
		}
	})
}

func TestLatestWorkerEvents(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		for i := range 5 {
			register(t, s, []string{"a", "b"}[i%2], fmt.Sprint("i", i), "w", time.Hour, t0.Add(time.Duration(i)*time.Second))
		}
		all, err := s.LatestWorkerEvents(ctx, "", 3)
		must(t, err)
		if len(all) != 3 || all[0].InstanceID != "i4" || all[2].InstanceID != "i2" || all[0].Seq <= all[1].Seq {
			t.Fatalf("latest 3: %+v", all)
		}
		inA, err := s.LatestWorkerEvents(ctx, "a", 0)
		must(t, err)
		if len(inA) != 3 || inA[0].InstanceID != "i4" || inA[2].InstanceID != "i0" {
			t.Fatalf("latest in a: %+v", inA)
		}
		_, err = s.LatestWorkerEvents(ctx, "", -1)
		wantErr(t, err, ErrInvalidInput)
	})
}
