package rosterotel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/rosterotel"
	"github.com/rosterdb/roster/service"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// envWorker makes the test binary a worker process of the database it names.
const envWorker = "ROSTEROTEL_TEST_WORKER"

func TestMain(m *testing.M) {
	if loc := os.Getenv(envWorker); loc != "" {
		os.Exit(workerProcess(loc))
	}
	os.Exit(m.Run())
}

// spanLine is a process span as the worker process prints it.
type spanLine struct {
	Name, Execution         string
	Kind                    string
	LinkTrace, LinkSpan     string
	TraceID, SpanID, Parent string
}

// printSpans prints each ended span as a line of JSON.
type printSpans struct {
	mu  *sync.Mutex
	enc *json.Encoder
}

func (printSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p printSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	l := spanLine{Name: s.Name(), Kind: s.SpanKind().String(), TraceID: s.SpanContext().TraceID().String(),
		SpanID: s.SpanContext().SpanID().String(), Parent: s.Parent().SpanID().String()}
	for _, kv := range s.Attributes() {
		if kv.Key == "messaging.message.id" {
			l.Execution = kv.Value.AsString()
		}
	}
	if links := s.Links(); len(links) == 1 {
		l.LinkTrace, l.LinkSpan = links[0].SpanContext.TraceID().String(), links[0].SpanContext.SpanID().String()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.enc.Encode(l)
}
func (printSpans) Shutdown(context.Context) error   { return nil }
func (printSpans) ForceFlush(context.Context) error { return nil }

// workerProcess runs a traced worker on the database at loc until stdin
// closes, printing its spans.
func workerProcess(loc string) int {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(printSpans{&sync.Mutex{}, json.NewEncoder(os.Stdout)}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = bufio.NewReader(os.Stdin).ReadByte(); cancel() }()
	s, err := service.Open(ctx, loc, service.WithMiddleware(rosterotel.New(rosterotel.WithTracerProvider(tp), rosterotel.WithPropagator(propagation.TraceContext{}))))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	err = s.RunWorker(ctx, service.WorkerArgs{
		Namespace: "ns", WorkerID: "w", InstanceID: fmt.Sprint("pid-", os.Getpid()), Lanes: []string{"jobs"},
		TTL: 5 * time.Second, LeaseTTL: 10 * time.Second,
		Handler: func(ctx context.Context, l service.Lease) ([]byte, error) {
			_, span := tp.Tracer("app").Start(ctx, "work")
			span.End()
			return nil, nil
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestLinkAcrossProcesses: work created in this process runs in another
// (the test binary again), whose process span links to the create span
// made here, and whose handler span nests under its process span.
func TestLinkAcrossProcesses(t *testing.T) {
	for _, eng := range []struct {
		name  string
		fresh func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "roster.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.Fresh(t) }},
	} {
		t.Run(eng.name, func(t *testing.T) {
			ctx := context.Background()
			loc := eng.fresh(t)
			tr := newTraced()
			s := open(t, loc, tr)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envWorker+"="+loc)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stdin.Close(); _ = cmd.Wait() }()

			created := map[string]trace.SpanContext{}
			for i := range 3 {
				cctx, parent := tr.tp.Tracer("app").Start(ctx, fmt.Sprint("request ", i))
				id, err := s.CreateExecution(cctx, service.CreateExecutionArgs{Namespace: "ns", Lane: "jobs"})
				if err != nil {
					t.Fatal(err)
				}
				parent.End()
				ended := tr.rec.Ended()
				created[id.String()] = ended[len(ended)-2].SpanContext() // the create span ended before its parent
				if ended[len(ended)-2].Name() != "create jobs" {
					t.Fatalf("spans %v", names(ended))
				}
			}
			lines := make(chan spanLine)
			go func() {
				dec := json.NewDecoder(stdout)
				for {
					var l spanLine
					if dec.Decode(&l) != nil {
						close(lines)
						return
					}
					lines <- l
				}
			}()
			byExecution := map[string]spanLine{}
			var work []spanLine
			timeout := time.After(30 * time.Second)
			for len(byExecution) < 3 || len(work) < 3 {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatal("the worker process ended")
					}
					if l.Name == "work" {
						work = append(work, l)
					} else {
						byExecution[l.Execution] = l
					}
				case <-timeout:
					t.Fatalf("spans from the worker process: %d process, %d work", len(byExecution), len(work))
				}
			}
			for id, want := range created {
				got, ok := byExecution[id]
				if !ok {
					t.Fatalf("no process span for %s", id)
				}
				if got.Name != "process jobs" || got.Kind != "consumer" || got.LinkTrace != want.TraceID().String() || got.LinkSpan != want.SpanID().String() {
					t.Errorf("process span of %s: %+v, want a link to %s/%s", id, got, want.TraceID(), want.SpanID())
				}
			}
			for _, w := range work {
				found := false
				for _, p := range byExecution {
					found = found || (w.Parent == p.SpanID && w.TraceID == p.TraceID)
				}
				if !found {
					t.Errorf("handler span %+v nests under no process span", w)
				}
			}
		})
	}
}
