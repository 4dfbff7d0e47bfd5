package rosterotel_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/rosterotel"
	"github.com/rosterdb/roster/service"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// engines are the databases two Stores share in the tests.
var engines = []struct {
	name  string
	fresh func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "roster.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.Fresh(t) }},
}

// traced is one process's tracing: its provider and what it recorded.
type traced struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newTraced() traced {
	rec := tracetest.NewSpanRecorder()
	return traced{rec: rec, tp: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
}

// open opens a Store at loc traced by tr.
func open(t *testing.T, loc string, tr traced) *service.Store {
	t.Helper()
	s, err := service.Open(context.Background(), loc, service.WithMiddleware(
		rosterotel.New(rosterotel.WithTracerProvider(tr.tp), rosterotel.WithPropagator(propagation.TraceContext{}))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func wantAttr(t *testing.T, s sdktrace.ReadOnlySpan, key string, want any) {
	t.Helper()
	v, ok := attrs(s)[attribute.Key(key)]
	if !ok {
		t.Errorf("span %q: no %s", s.Name(), key)
		return
	}
	if got := v.AsInterface(); got != want {
		t.Errorf("span %q: %s = %v (%T), want %v (%T)", s.Name(), key, got, got, want, want)
	}
}

// TestSpans: one Store creates (under a span of the caller's), another on
// the same database runs the work; the create spans are PRODUCER children
// of the caller's span with the messaging attributes, the context travels
// in Metadata, each process span is a CONSUMER span linked to its create
// span, with the run's attributes, the handler's spans nest under it, and a
// failed run is an Error with the error's text.
func TestSpans(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			loc := eng.fresh(t)
			prod, cons := newTraced(), newTraced()
			producer, consumer := open(t, loc, prod), open(t, loc, cons)

			reqCtx, request := prod.tp.Tracer("app").Start(ctx, "request")
			one, err := producer.CreateExecution(reqCtx, service.CreateExecutionArgs{
				Namespace: "ns", Lane: "emails", Payload: []byte("ok"), Metadata: map[string]string{"app": "x"},
			})
			if err != nil {
				t.Fatal(err)
			}
			batch, err := producer.CreateExecutions(reqCtx, []service.CreateExecutionArgs{
				{Namespace: "ns", Lane: "emails", Payload: []byte("ok")},
				{Namespace: "ns", Lane: "emails", Payload: []byte("fail")},
			})
			if err != nil {
				t.Fatal(err)
			}
			request.End()

			e, err := producer.GetExecution(ctx, one)
			if err != nil {
				t.Fatal(err)
			}
			if e.Metadata["app"] != "x" || len(e.Metadata["traceparent"]) != 55 {
				t.Fatalf("metadata %v: want the caller's and a traceparent", e.Metadata)
			}

			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- consumer.RunWorker(runCtx, service.WorkerArgs{
					Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"emails"}, TTL: 5 * time.Second,
					LeaseTTL: 10 * time.Second, Concurrency: 3,
					Handler: func(ctx context.Context, l service.Lease) ([]byte, error) {
						_, span := cons.tp.Tracer("app").Start(ctx, "send")
						defer span.End()
						if string(l.Payload) == "fail" {
							return nil, errors.New("mailbox full")
						}
						return nil, nil
					},
				})
			}()
			deadline := time.Now().Add(20 * time.Second)
			for countNamed(cons.rec.Ended(), "process emails") < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("process spans: %d of 3", countNamed(cons.rec.Ended(), "process emails"))
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			// The producer's side.
			var creates []sdktrace.ReadOnlySpan
			for _, s := range prod.rec.Ended() {
				if s.Name() == "create emails" {
					creates = append(creates, s)
				}
			}
			if len(creates) != 2 {
				t.Fatalf("%d create spans, want 2", len(creates))
			}
			createOf := map[uuid.UUID]trace.SpanContext{}
			for i, s := range creates {
				if s.SpanKind() != trace.SpanKindProducer || s.Parent().SpanID() != request.SpanContext().SpanID() ||
					s.SpanContext().TraceID() != request.SpanContext().TraceID() {
					t.Errorf("create span %d: kind %v, parent %v (want the request %v)", i, s.SpanKind(), s.Parent().SpanID(), request.SpanContext().SpanID())
				}
				wantAttr(t, s, "messaging.system", "roster")
				wantAttr(t, s, "messaging.operation.type", "create")
				wantAttr(t, s, "messaging.destination.name", "emails")
				wantAttr(t, s, "roster.namespace", "ns")
				_, hasID := attrs(s)["messaging.message.id"]
				_, hasCount := attrs(s)["messaging.batch.message_count"]
				if i == 0 {
					wantAttr(t, s, "messaging.message.id", one.String())
					if hasCount {
						t.Error("a single create has a batch count")
					}
					createOf[one] = s.SpanContext()
				} else {
					wantAttr(t, s, "messaging.batch.message_count", int64(2))
					if hasID {
						t.Error("a batch create has a message id")
					}
					createOf[batch[0]], createOf[batch[1]] = s.SpanContext(), s.SpanContext()
				}
			}

			// The consumer's side, another Store (another tracer provider).
			ended := cons.rec.Ended()
			for _, s := range ended {
				if s.Name() != "process emails" {
					continue
				}
				id, err := uuid.Parse(attrs(s)["messaging.message.id"].AsString())
				if err != nil {
					t.Fatalf("process span without an execution id: %v", err)
				}
				if s.SpanKind() != trace.SpanKindConsumer {
					t.Errorf("process span kind %v", s.SpanKind())
				}
				links := s.Links()
				if len(links) != 1 || links[0].SpanContext.TraceID() != createOf[id].TraceID() || links[0].SpanContext.SpanID() != createOf[id].SpanID() {
					t.Errorf("process span of %s: links %+v, want its create span %v", id, links, createOf[id])
				}
				if s.Parent().IsValid() {
					t.Errorf("process span of %s has a parent %v: it starts a trace of its own", id, s.Parent())
				}
				wantAttr(t, s, "messaging.system", "roster")
				wantAttr(t, s, "messaging.operation.type", "process")
				wantAttr(t, s, "messaging.destination.name", "emails")
				wantAttr(t, s, "roster.namespace", "ns")
				wantAttr(t, s, "roster.attempt", int64(1))
				wantAttr(t, s, "roster.epoch", int64(1))
				if id == batch[1] {
					if s.Status().Code != codes.Error || s.Status().Description != "mailbox full" {
						t.Errorf("failed run's status %+v", s.Status())
					}
				} else if s.Status().Code == codes.Error {
					t.Errorf("a completed run's status %+v", s.Status())
				}
				children := 0
				for _, c := range ended {
					if c.Name() == "send" && c.Parent().SpanID() == s.SpanContext().SpanID() {
						children++
					}
				}
				if children != 1 {
					t.Errorf("process span of %s: %d handler spans under it, want 1", id, children)
				}
			}
		})
	}
}

func countNamed(spans []sdktrace.ReadOnlySpan, name string) int {
	n := 0
	for _, s := range spans {
		if s.Name() == name {
			n++
		}
	}
	return n
}

// TestCreateTxAndErrors: CreateExecutionsTx is traced as the other creates;
// a refused create's span is an Error; a snoozed run is not.
func TestCreateTxAndErrors(t *testing.T) {
	ctx := context.Background()
	tr := newTraced()
	s := open(t, filepath.Join(t.TempDir(), "roster.db"), tr)
	_, err := s.CreateExecution(ctx, service.CreateExecutionArgs{Namespace: "ns", Lane: ""})
	if !errors.Is(err, service.ErrInvalidInput) {
		t.Fatalf("err %v", err)
	}
	_, err = s.CreateExecutionsTx(ctx, "not a tx", []service.CreateExecutionArgs{{Namespace: "ns", Lane: "tx"}})
	if !errors.Is(err, service.ErrInvalidInput) {
		t.Fatalf("err %v", err)
	}
	spans := tr.rec.Ended()
	if len(spans) != 2 || spans[0].Name() != "create" || spans[1].Name() != "create tx" {
		t.Fatalf("spans %v", names(spans))
	}
	for _, sp := range spans {
		if sp.Status().Code != codes.Error || sp.Status().Description == "" {
			t.Errorf("span %q status %+v", sp.Name(), sp.Status())
		}
	}

	m := rosterotel.New(rosterotel.WithTracerProvider(tr.tp), rosterotel.WithPropagator(propagation.TraceContext{}))
	_, err = m.Run(ctx, service.Lease{Lane: "l"}, func(context.Context, service.Lease) ([]byte, error) {
		return nil, service.Snooze(time.Second)
	})
	if err == nil {
		t.Fatal("the snooze was swallowed")
	}
	last := tr.rec.Ended()[len(tr.rec.Ended())-1]
	if last.Name() != "process l" || last.Status().Code == codes.Error || len(last.Events()) != 1 || last.Events()[0].Name != "snoozed" {
		t.Fatalf("snoozed run: %q %+v %v", last.Name(), last.Status(), last.Events())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic was swallowed")
			}
		}()
		_, _ = m.Run(ctx, service.Lease{Lane: "p"}, func(context.Context, service.Lease) ([]byte, error) { panic("boom") })
	}()
	last = tr.rec.Ended()[len(tr.rec.Ended())-1]
	if last.Name() != "process p" || last.Status().Code != codes.Error || last.Status().Description != "panic: boom" {
		t.Fatalf("panicked run: %q %+v", last.Name(), last.Status())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return slices.Clip(out)
}
