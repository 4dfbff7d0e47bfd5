package fleetproc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// flowWorker runs RunWorker as instance name with arg handlers (each takes
// 3 ms; "N:POLL" also sets the worker's poll to the duration POLL) on lane
// "capped" until SIGTERM, printing "ready" once registered,
// then "start <id> <group> <unix ns>" as each handler starts and "end <id>
// <unix ns>" as it returns (the group is the payload).
func flowWorker(db, name, arg string) int {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { <-sig; cancel() }()
	arg, pollArg, _ := strings.Cut(arg, ":")
	opts := []service.Option{service.WithoutMigrate()}
	if pollArg != "" {
		poll, err := time.ParseDuration(pollArg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "poll:", err)
			return 1
		}
		opts = append(opts, service.WithWorkerPoll(poll))
	}
	s, err := service.Open(ctx, db, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer s.Close()
	concurrency, _ := strconv.Atoi(arg)
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	err = s.RunWorker(ctx, service.WorkerArgs{
		Namespace: "ns", WorkerID: "flow", InstanceID: name, Lanes: []string{"capped"}, TTL: 10 * time.Second,
		LeaseTTL: 10 * time.Second, Concurrency: concurrency, Ready: func() { say("ready") },
		Handler: func(_ context.Context, l service.Lease) ([]byte, error) {
			say("start %s %s %d", l.ExecutionID, l.Payload, time.Now().UnixNano())
			time.Sleep(3 * time.Millisecond)
			say("end %s %d", l.ExecutionID, time.Now().UnixNano())
			return nil, nil
		},
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	return 0
}

// span is one handler run of a flow worker.
type span struct {
	group      string
	start, end int64
}

// flowProcs starts n flow workers of concurrency handlers each and returns
// their spans so far (by execution id) and when each execution started.
type flowProcs struct {
	mu     sync.Mutex
	spans  map[string]*span
	starts chan string
}

func startFlowWorkers(t *testing.T, db string, n, concurrency int, poll ...time.Duration) *flowProcs {
	t.Helper()
	arg := strconv.Itoa(concurrency)
	if len(poll) > 0 {
		arg += ":" + poll[0].String()
	}
	f := &flowProcs{spans: map[string]*span{}, starts: make(chan string, 100_000)}
	ready := make(chan struct{}, n)
	for i := range n {
		cmd := child(t, "flowworker", db, fmt.Sprintf("p%d", i), arg)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
		go f.read(bufio.NewScanner(stdout), ready)
	}
	for range n {
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			t.Fatal("a flow worker was not ready")
		}
	}
	return f
}

func (f *flowProcs) read(sc *bufio.Scanner, ready chan<- struct{}) {
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 1 && fields[0] == "ready":
			ready <- struct{}{}
		case len(fields) == 4 && fields[0] == "start":
			at, _ := strconv.ParseInt(fields[3], 10, 64)
			f.mu.Lock()
			f.spans[fields[1]] = &span{group: fields[2], start: at}
			f.mu.Unlock()
			f.starts <- fields[1]
		case len(fields) == 3 && fields[0] == "end":
			at, _ := strconv.ParseInt(fields[2], 10, 64)
			f.mu.Lock()
			if sp := f.spans[fields[1]]; sp != nil {
				sp.end = at
			}
			f.mu.Unlock()
		}
	}
}

// overlap is the most spans (of group g; "" any) that ran at one instant.
func overlap(spans []*span, g string) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, s := range spans {
		if g == "" || s.group == g {
			edges = append(edges, edge{s.start, 1}, edge{s.end, -1})
		}
	}
	// At equal instants an end comes before a start: the handlers' spans
	// lie inside their leases, which a cap orders.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// 64 handlers in 4 processes on a lane capped at 5 running, 2 per group:
// the handlers' runs (each inside its lease: it starts after the claim
// commits and ends before the completion is written) never overlap more
// than the caps allow, in the lane or in any group.
func TestCapsAcrossProcesses(t *testing.T) {
	for name, db := range targets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := service.Open(ctx, db) // migrates
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const jobs, groups, laneCap, groupCap = 400, 8, 5, 2
			if err := s.PutLaneLimits(ctx, service.LaneLimits{Namespace: "ns", Lane: "capped", MaxRunning: laneCap, MaxRunningPerGroup: groupCap}); err != nil {
				t.Fatal(err)
			}
			f := startFlowWorkers(t, db, 4, 16)
			items := make([]service.CreateExecutionArgs, jobs)
			for i := range items {
				g := fmt.Sprintf("g%d", i%groups)
				items[i] = service.CreateExecutionArgs{Namespace: "ns", Lane: "capped", Group: g, Payload: []byte(g)}
			}
			if _, err := s.CreateExecutions(ctx, items); err != nil {
				t.Fatal(err)
			}
			deadline := time.After(2 * time.Minute)
			for range jobs {
				select {
				case <-f.starts:
				case <-deadline:
					t.Fatalf("%d of %d started", len(f.spans), jobs)
				}
			}
			var spans []*span
			for wait := 0; ; wait++ {
				f.mu.Lock()
				spans = spans[:0]
				ended := true
				for _, sp := range f.spans {
					spans = append(spans, sp)
					ended = ended && sp.end != 0
				}
				f.mu.Unlock()
				if ended || wait > 200 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got := overlap(spans, ""); got > laneCap || got < laneCap-1 {
				t.Fatalf("at most %d ran in the lane at once; the cap is %d", got, laneCap)
			}
			for g := range groups {
				if got := overlap(spans, fmt.Sprintf("g%d", g)); got > groupCap {
					t.Fatalf("at most %d ran in group g%d at once; the cap is %d", got, g, groupCap)
				}
			}
		})
	}
}

// A paused lane's work waits in every process; resuming it through
// another process's Store starts it within milliseconds (the wake-up of new
// work), not at the next poll.
func TestPauseAndResumeAcrossProcesses(t *testing.T) {
	for name, db := range targets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := service.Open(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			lane := service.LaneLimits{Namespace: "ns", Lane: "capped", Paused: true}
			if err := s.PutLaneLimits(ctx, lane); err != nil {
				t.Fatal(err)
			}
			// The worker's poll is an hour: only a wake-up can start work
			// in the minutes this test lasts.
			f := startFlowWorkers(t, db, 1, 4, time.Hour)
			for range 3 {
				if _, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "capped", Payload: []byte("g")}); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case id := <-f.starts:
				t.Fatalf("%s started in a paused lane", id)
			case <-time.After(500 * time.Millisecond): // the creates' wake-ups came and went
			}
			lane.Paused = false
			resumed := time.Now()
			if err := s.PutLaneLimits(ctx, lane); err != nil {
				t.Fatal(err)
			}
			select {
			case <-f.starts: // woken: the poll is an hour away
				t.Logf("the first start came %v after the resume", time.Since(resumed))
			case <-time.After(10 * time.Second):
				t.Fatal("nothing started within 10 s of the resume: the worker was not woken")
			}
		})
	}
}
