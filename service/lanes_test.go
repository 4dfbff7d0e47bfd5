package service

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

func putLimits(t testing.TB, s *Store, l LaneLimits) {
	t.Helper()
	if l.Namespace == "" {
		l.Namespace = "ns"
	}
	if l.Lane == "" {
		l.Lane = "default"
	}
	must(t, s.PutLaneLimits(context.Background(), l))
}

// claimAll claims up to max at now, ErrNoWork as none.
func claimAll(t testing.TB, s *Store, inst string, now time.Time, max int) []Lease {
	t.Helper()
	ls, err := s.ClaimExecutions(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Hour, Now: now}, max)
	if errors.Is(err, ErrNoWork) {
		return nil
	}
	must(t, err)
	return ls
}

func complete(t testing.TB, s *Store, l Lease, now time.Time) {
	t.Helper()
	must(t, s.CompleteExecution(context.Background(), CompleteArgs{Lease: l, Now: now}))
}

func TestLaneLimitsPutListDelete(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		putLimits(t, s, LaneLimits{Namespace: "b", Lane: "x", MaxRunning: 3})
		putLimits(t, s, LaneLimits{Namespace: "a", Lane: "y", Rate: 5, RatePeriod: time.Minute, Paused: true})
		putLimits(t, s, LaneLimits{Namespace: "a", Lane: "x", MaxRunningPerGroup: 1})
		all, err := s.ListLaneLimits(ctx, "")
		must(t, err)
		want := []LaneLimits{
			{Namespace: "a", Lane: "x", MaxRunningPerGroup: 1},
			{Namespace: "a", Lane: "y", Rate: 5, RatePeriod: time.Minute, Paused: true},
			{Namespace: "b", Lane: "x", MaxRunning: 3},
		}
		if !reflect.DeepEqual(all, want) {
			t.Fatalf("ListLaneLimits(\"\") = %+v, want %+v", all, want)
		}
		// Replace.
		putLimits(t, s, LaneLimits{Namespace: "a", Lane: "y", MaxRunning: 7})
		a, err := s.ListLaneLimits(ctx, "a")
		must(t, err)
		if want := []LaneLimits{want[0], {Namespace: "a", Lane: "y", MaxRunning: 7}}; !reflect.DeepEqual(a, want) {
			t.Fatalf("ListLaneLimits(a) after a replace = %+v, want %+v", a, want)
		}
		must(t, s.DeleteLaneLimits(ctx, "a", "y"))
		wantErr(t, s.DeleteLaneLimits(ctx, "a", "y"), ErrNotFound)
		wantErr(t, s.DeleteLaneLimits(ctx, "c", "x"), ErrNotFound)
		if a, _ := s.ListLaneLimits(ctx, "a"); len(a) != 1 {
			t.Fatalf("after the delete: %+v", a)
		}
	})
}

func TestLaneLimitsValidation(t *testing.T) {
	validationOnly(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		for _, c := range []struct {
			l     LaneLimits
			field string
		}{
			{LaneLimits{Lane: "x"}, "Namespace"},
			{LaneLimits{Namespace: "ns"}, "Lane"},
			{LaneLimits{Namespace: "ns", Lane: "bad\x00lane"}, "Lane"},
			{LaneLimits{Namespace: "ns", Lane: "x", MaxRunning: -1}, "MaxRunning"},
			{LaneLimits{Namespace: "ns", Lane: "x", MaxRunningPerGroup: -2}, "MaxRunningPerGroup"},
			{LaneLimits{Namespace: "ns", Lane: "x", Rate: -1, RatePeriod: time.Second}, "Rate"},
			{LaneLimits{Namespace: "ns", Lane: "x", Rate: 1}, "RatePeriod"},
			{LaneLimits{Namespace: "ns", Lane: "x", RatePeriod: time.Second}, "RatePeriod"},
			{LaneLimits{Namespace: "ns", Lane: "x", Rate: 1, RatePeriod: 999 * time.Millisecond}, "RatePeriod"},
			{LaneLimits{Namespace: "ns", Lane: "x", Rate: 1, RatePeriod: 24*time.Hour + time.Millisecond}, "RatePeriod"},
		} {
			err := s.PutLaneLimits(ctx, c.l)
			wantErr(t, err, ErrInvalidInput)
			if !errorNames(err, c.field) {
				t.Errorf("PutLaneLimits(%+v) = %v, want it to name %s", c.l, err, c.field)
			}
		}
		if all, _ := s.ListLaneLimits(ctx, ""); len(all) != 0 {
			t.Fatalf("bad limits were written: %+v", all)
		}
		_, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "x", Group: "bad\ngroup"})
		wantErr(t, err, ErrInvalidInput)
		if !errorNames(err, "Group") {
			t.Errorf("a bad Group: %v", err)
		}
		wantErr(t, s.DeleteLaneLimits(ctx, "", "x"), ErrInvalidInput)
	})
}

func errorNames(err error, field string) bool {
	return err != nil && (len(err.Error()) > 0) && containsWord(err.Error(), field)
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w {
			return true
		}
	}
	return false
}

func TestLaneCap(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default", "other"}, nil)
		for range 5 {
			create(t, s, CreateExecutionArgs{Priority: 9})
		}
		other := create(t, s, CreateExecutionArgs{Lane: "other"})
		putLimits(t, s, LaneLimits{MaxRunning: 2})
		got := claimAll(t, s, "i", t0, 10)
		if len(got) != 3 {
			t.Fatalf("a batch of 10 under a cap of 2 took %d, want 2 of the lane and the other lane's one", len(got))
		}
		if got[2].ExecutionID != other {
			t.Fatalf("the other lane's execution was not taken instead: %+v", got)
		}
		if more := claimAll(t, s, "i", t0, 10); len(more) != 0 {
			t.Fatalf("the cap let %d more run", len(more))
		}
		complete(t, s, got[0], t0)
		if more := claimAll(t, s, "i", t0, 10); len(more) != 1 {
			t.Fatalf("an end under the cap freed %d places, want 1", len(more))
		}
		// Lowered below what runs: nothing until the count is under it.
		putLimits(t, s, LaneLimits{MaxRunning: 1})
		complete(t, s, got[1], t0)
		if more := claimAll(t, s, "i", t0, 10); len(more) != 0 {
			t.Fatalf("a lowered cap let %d run with 1 running", len(more))
		}
		// Raised: room again; deleted: no cap.
		putLimits(t, s, LaneLimits{MaxRunning: 2})
		if more := claimAll(t, s, "i", t0, 10); len(more) != 1 {
			t.Fatalf("a raised cap took %d, want 1", len(more))
		}
		must(t, s.DeleteLaneLimits(context.Background(), "ns", "default"))
		if more := claimAll(t, s, "i", t0, 10); len(more) != 1 {
			t.Fatalf("without limits the last one was not taken: %d", len(more))
		}
	})
}

func TestLaneCapPerGroupIsASequence(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		putLimits(t, s, LaneLimits{MaxRunningPerGroup: 1})
		var a, bs []uuid.UUID
		for i := range 3 {
			a = append(a, create(t, s, CreateExecutionArgs{Group: "a", RunAt: t0.Add(time.Duration(i-10) * time.Second), MaxAttempts: 3}))
			bs = append(bs, create(t, s, CreateExecutionArgs{Group: "b", RunAt: t0.Add(time.Duration(i-10) * time.Second)}))
		}
		ungrouped := create(t, s, CreateExecutionArgs{})
		got := claimAll(t, s, "i", t0, 10)
		ids := map[uuid.UUID]Lease{}
		for _, l := range got {
			ids[l.ExecutionID] = l
		}
		if len(got) != 3 || ids[a[0]].ExecutionID != a[0] || ids[bs[0]].ExecutionID != bs[0] || ids[ungrouped].ExecutionID != ungrouped {
			t.Fatalf("one per group: got %d leases %+v", len(got), got)
		}
		if more := claimAll(t, s, "i", t0, 10); len(more) != 0 {
			t.Fatalf("a group ran two at once")
		}
		// A failed attempt with attempts left: the group's next is its
		// earliest by RunAt (the retry waits with RunAt now, after a[1]).
		must(t, s.FailExecution(context.Background(), FailArgs{Lease: ids[a[0]], Reason: "boom", Now: t0}))
		next := claimAll(t, s, "i", t0, 10)
		if len(next) != 1 || next[0].ExecutionID != a[1] {
			t.Fatalf("after a's first failed, claimed %+v, want a[1]", next)
		}
		complete(t, s, ids[bs[0]], t0)
		if next := claimAll(t, s, "i", t0, 10); len(next) != 1 || next[0].ExecutionID != bs[1] {
			t.Fatalf("after b's first completed, claimed %+v, want b[1]", next)
		}
	})
}

// A sequence per group survives a crashed holder: while the holder's
// execution is still running (its worker marked dead, its lease not yet
// reclaimed) the group starts nothing else; once reclaimed it waits again
// (RunAt now, so after the group's earlier ones) and the group goes on one
// at a time, in RunAt order.
func TestLaneCapPerGroupSequenceAfterACrashedHolder(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "a", []string{"default"}, nil)
		worker(t, s, "ns", "b", []string{"default"}, nil)
		putLimits(t, s, LaneLimits{MaxRunningPerGroup: 1})
		var seq []uuid.UUID
		for i := range 3 {
			seq = append(seq, create(t, s, CreateExecutionArgs{Group: "g", RunAt: t0.Add(time.Duration(i-10) * time.Second), MaxAttempts: 3}))
		}
		if l := claim(t, s, "a", t0); l.ExecutionID != seq[0] {
			t.Fatalf("first claim took %s, want the group's first %s", l.ExecutionID, seq[0])
		}
		must(t, s.MarkWorkerDead(ctx, MarkWorkerDeadArgs{Namespace: "ns", InstanceID: "a", Reason: "crashed", Now: t0}))
		if got := claimAll(t, s, "b", t0, 10); len(got) != 0 {
			t.Fatalf("the group ran another while its crashed holder's execution was not reclaimed: %d claimed", len(got))
		}
		if n, err := s.ReclaimExpiredLeases(ctx, t0, 0); err != nil || n != 1 {
			t.Fatalf("reclaimed %d, %v; want 1", n, err)
		}
		for i, want := range []uuid.UUID{seq[1], seq[2], seq[0]} {
			got := claimAll(t, s, "b", t0, 10)
			if len(got) != 1 || got[0].ExecutionID != want {
				t.Fatalf("claim %d of the sequence took %d (%v), want %s alone", i, len(got), got, want)
			}
			complete(t, s, got[0], t0)
		}
	})
}

func TestLaneRate(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, clock := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		for range 7 {
			create(t, s, CreateExecutionArgs{})
		}
		putLimits(t, s, LaneLimits{Rate: 3, RatePeriod: 10 * time.Second})
		// t0 is a whole second: windows start at multiples of 10 s from the epoch.
		start := t0.Truncate(10 * time.Second)
		at := start.Add(9 * time.Second)
		clock.Advance(at.Sub(clock.Now()))
		if got := claimAll(t, s, "i", at, 2); len(got) != 2 {
			t.Fatalf("first claim of the window took %d, want 2", len(got))
		}
		if got := claimAll(t, s, "i", at, 5); len(got) != 1 {
			t.Fatalf("a rate of 3 let %d more of the window claim, want 1", len(got))
		}
		_, err := s.ClaimExecution(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour, Now: at.Add(999 * time.Millisecond)})
		wantErr(t, err, ErrNoWork)
		// Replacing the limits keeps the window's count.
		putLimits(t, s, LaneLimits{Rate: 3, RatePeriod: 10 * time.Second, MaxRunning: 100})
		if got := claimAll(t, s, "i", at, 5); len(got) != 0 {
			t.Fatalf("a replace reset the rate window: %d claimed", len(got))
		}
		next := start.Add(10 * time.Second)
		if got := claimAll(t, s, "i", next, 5); len(got) != 3 {
			t.Fatalf("the next window took %d, want 3", len(got))
		}
	})
}

func TestLanePauseAndResume(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		create(t, s, CreateExecutionArgs{})
		create(t, s, CreateExecutionArgs{})
		putLimits(t, s, LaneLimits{Paused: true})
		_, err := s.ClaimExecution(ctx, ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour, Now: t0})
		wantErr(t, err, ErrNoWork)
		putLimits(t, s, LaneLimits{})
		if got := claimAll(t, s, "i", t0, 1); len(got) != 1 {
			t.Fatal("a resumed lane was not claimed")
		}
		putLimits(t, s, LaneLimits{Paused: true})
		wantErr(t, claimErr(s, t0), ErrNoWork)
		must(t, s.DeleteLaneLimits(ctx, "ns", "default"))
		if got := claimAll(t, s, "i", t0, 1); len(got) != 1 {
			t.Fatal("a lane whose limits were deleted was not claimed")
		}
	})
}

func claimErr(s *Store, now time.Time) error {
	_, err := s.ClaimExecution(context.Background(), ClaimArgs{Namespace: "ns", InstanceID: "i", LeaseTTL: time.Hour, Now: now})
	return err
}

func TestLaneFairShares(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		noisy := make([]CreateExecutionArgs, 300)
		for i := range noisy {
			noisy[i] = CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: "noisy"}
		}
		_, err := s.CreateExecutions(ctx, noisy)
		must(t, err)
		// A few claims of the noisy group, then a quiet group's 10.
		for range 5 {
			claim(t, s, "i", t0)
		}
		quiet := map[uuid.UUID]bool{}
		for range 10 {
			quiet[create(t, s, CreateExecutionArgs{Group: "quiet"})] = true
		}
		seen := 0
		for i := range 20 {
			if quiet[claim(t, s, "i", t0).ExecutionID] {
				seen++
			}
			if i == 0 && seen != 1 {
				t.Fatal("a new group's first execution did not start at the next claim")
			}
		}
		if seen != 10 {
			t.Fatalf("%d of the quiet group's 10 started in the next 20 claims", seen)
		}
		// Priority comes first: a higher priority of the noisy group beats the turns.
		high := create(t, s, CreateExecutionArgs{Group: "noisy", Priority: 1})
		create(t, s, CreateExecutionArgs{Group: "quiet"})
		if l := claim(t, s, "i", t0); l.ExecutionID != high {
			t.Fatal("priority did not come before the turns")
		}
	})
}

func TestLaneFairSharesInABatch(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		groups := []string{"a", "b", "c"}
		for _, g := range groups {
			for range 4 {
				create(t, s, CreateExecutionArgs{Group: g})
			}
		}
		got := claimAll(t, s, "i", t0, 6)
		count := map[string]int{}
		for _, l := range got {
			count[getExecution(t, s, l.ExecutionID).Group]++
		}
		if !reflect.DeepEqual(count, map[string]int{"a": 2, "b": 2, "c": 2}) {
			t.Fatalf("a batch of 6 over 3 groups took %v", count)
		}
	})
}

// TestLaneCapConcurrent claims and completes with many claimers on several
// Stores of one database and checks that the running count of the lane and
// of each group never exceeded its cap. Each claimer counts a lease as
// running from just after its claim returned to just before its completion
// is sent: a span inside the one the database counts, so a count above a cap
// here is one above the cap there.
func TestLaneCapConcurrent(t *testing.T) {
	conformanceShared(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		loc := b.fresh(t)
		const stores, claimers, jobs, laneCap, groupCap = 4, 16, 300, 6, 2
		var ss []*Store
		for range stores {
			s, _ := b.open(t, loc)
			ss = append(ss, s)
		}
		items := make([]CreateExecutionArgs, jobs)
		group := map[uuid.UUID]string{}
		for i := range items {
			items[i] = CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: fmt.Sprintf("g%d", i%5)}
		}
		putLimits(t, ss[0], LaneLimits{MaxRunning: laneCap, MaxRunningPerGroup: groupCap})
		ids, err := ss[0].CreateExecutions(ctx, items)
		must(t, err)
		for i, id := range ids {
			group[id] = items[i].Group
		}
		var mu sync.Mutex
		running, perGroup, maxRunning, maxGroup := 0, map[string]int{}, 0, 0
		var done atomic.Int64
		var wg sync.WaitGroup
		for c := range claimers {
			s := ss[c%stores]
			inst := fmt.Sprintf("i%d", c)
			worker(t, s, "ns", inst, []string{"default"}, nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done.Load() < jobs {
					ls, err := s.ClaimExecutions(ctx, ClaimArgs{Namespace: "ns", InstanceID: inst, LeaseTTL: time.Hour, Now: t0}, 3)
					if errors.Is(err, ErrNoWork) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, l := range ls {
						running++
						perGroup[group[l.ExecutionID]]++
						maxRunning = max(maxRunning, running)
						maxGroup = max(maxGroup, perGroup[group[l.ExecutionID]])
					}
					mu.Unlock()
					time.Sleep(time.Millisecond)
					for _, l := range ls {
						mu.Lock()
						running--
						perGroup[group[l.ExecutionID]]--
						mu.Unlock()
						if err := s.CompleteExecution(ctx, CompleteArgs{Lease: l, Now: t0}); err != nil {
							t.Error(err)
							return
						}
						done.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if maxRunning > laneCap || maxGroup > groupCap {
			t.Fatalf("at most %d ran in the lane (cap %d) and %d in a group (cap %d)", maxRunning, laneCap, maxGroup, groupCap)
		}
		if maxRunning < 2 {
			t.Fatalf("the claimers never overlapped (at most %d ran at once): the test shows nothing", maxRunning)
		}
		t.Logf("at most %d ran at once in the lane, %d in a group", maxRunning, maxGroup)
	})
}

// Stats shows each live lane's limits, nil for a lane without.
func TestStatsShowsLaneLimits(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		create(t, s, CreateExecutionArgs{})
		create(t, s, CreateExecutionArgs{})
		create(t, s, CreateExecutionArgs{Lane: "free"})
		putLimits(t, s, LaneLimits{MaxRunning: 1, Paused: false})
		putLimits(t, s, LaneLimits{Lane: "idle", Paused: true}) // nothing live: left out
		claim(t, s, "i", t0)
		st, err := s.Stats(ctx, t0)
		must(t, err)
		want := []LaneStats{
			{Lane: "default", Ready: 1, Running: 1, OldestReadyRunAt: t0, Limits: &LaneLimits{Namespace: "ns", Lane: "default", MaxRunning: 1}, WorkersAlive: 1},
			{Lane: "free", Ready: 1, OldestReadyRunAt: t0},
		}
		if len(st.Namespaces) != 1 || !reflect.DeepEqual(st.Namespaces[0].Lanes, want) {
			t.Fatalf("Stats lanes = %+v, want %+v", st.Namespaces, want)
		}
	})
}

// Scheduled work of a lane with limits or groups becomes claimable when
// due, claim after claim (a worker's claims after its first flow claim start
// as flow claims).
func TestLaneScheduledWork(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s, _ := b.newStore(t)
		worker(t, s, "ns", "i", []string{"default"}, nil)
		putLimits(t, s, LaneLimits{MaxRunning: 10})
		first := create(t, s, CreateExecutionArgs{RunAt: t0.Add(10 * time.Second), Group: "g"})
		second := create(t, s, CreateExecutionArgs{RunAt: t0.Add(20 * time.Second)})
		wantErr(t, claimErr(s, t0), ErrNoWork)
		wantErr(t, claimErr(s, t0.Add(9*time.Second)), ErrNoWork)
		if l := claim(t, s, "i", t0.Add(10*time.Second)); l.ExecutionID != first {
			t.Fatal("the first scheduled execution was not claimed when due")
		}
		wantErr(t, claimErr(s, t0.Add(19*time.Second)), ErrNoWork)
		if l := claim(t, s, "i", t0.Add(20*time.Second)); l.ExecutionID != second {
			t.Fatal("the second scheduled execution was not claimed when due")
		}
	})
}

// RunWorker on a capped lane: never more than the cap at once, every
// execution done, and (with the poll an hour away) each end wakes the next
// claim; a paused lane's work starts as soon as it is resumed.
func TestRunWorkerCappedLane(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		s := realStore(t, b, WithWorkerPoll(time.Hour))
		putLimits(t, s, LaneLimits{MaxRunning: 2, MaxRunningPerGroup: 1})
		var mu sync.Mutex
		running, most := 0, 0
		perGroup := map[string]int{}
		done := make(chan struct{}, 100)
		stop := runWorker(t, s, WorkerArgs{Concurrency: 8, Handler: func(_ context.Context, l Lease) ([]byte, error) {
			g := string(l.Payload)
			mu.Lock()
			running++
			perGroup[g]++
			most = max(most, running)
			if perGroup[g] > 1 {
				mu.Unlock()
				return nil, fmt.Errorf("group %s ran twice at once", g)
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			running--
			perGroup[g]--
			mu.Unlock()
			done <- struct{}{}
			return nil, nil
		}})
		const jobs = 24
		items := make([]CreateExecutionArgs, jobs)
		for i := range items {
			g := fmt.Sprintf("g%d", i%3)
			items[i] = CreateExecutionArgs{Namespace: "ns", Lane: "default", Group: g, Payload: []byte(g)}
		}
		_, err := s.CreateExecutions(context.Background(), items)
		must(t, err)
		for i := range jobs {
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%d of %d ran: a worker held back by a cap was not woken", i, jobs)
			}
		}
		if most > 2 {
			t.Fatalf("%d ran at once under a cap of 2", most)
		}
		putLimits(t, s, LaneLimits{Paused: true})
		create(t, s, CreateExecutionArgs{Payload: []byte("g0")})
		select {
		case <-done:
			t.Fatal("a paused lane's execution ran")
		case <-time.After(200 * time.Millisecond):
		}
		putLimits(t, s, LaneLimits{})
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("a resumed lane's execution did not start")
		}
		must(t, stop())
	})
}

// writeCounter counts the writes a Store commits.
type writeCounter struct {
	nopObserver
	writes atomic.Int64
}

func (c *writeCounter) Committed(_ time.Duration, writes int) { c.writes.Add(int64(writes)) }

// A Store records a lane's turns with the first execution created in it with
// a group, and writes nothing more for that on the next ones: one write per
// create, as without groups.
func TestGroupedCreateRecordsItsLaneOnce(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		obs := &writeCounter{}
		s, _ := b.newStore(t, WithObserver(obs))
		writes := func(a CreateExecutionArgs) int64 {
			before := obs.writes.Load()
			create(t, s, a)
			return obs.writes.Load() - before
		}
		if n := writes(CreateExecutionArgs{Group: "a"}); n != 2 {
			t.Fatalf("the first grouped create of a lane wrote %d times, want 2 (its lane's turns, then it)", n)
		}
		for _, g := range []string{"a", "b", ""} {
			if n := writes(CreateExecutionArgs{Group: g}); n != 1 {
				t.Fatalf("a create of group %q in a lane with turns wrote %d times, want 1", g, n)
			}
		}
		if n := writes(CreateExecutionArgs{Lane: "other", Group: "a"}); n != 2 {
			t.Fatalf("the first grouped create of another lane wrote %d times, want 2", n)
		}
	})
}
