package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// recordingMiddleware logs each call it wraps as "name:create:n" or
// "name:run:lane", and adds Metadata["by-"+name] to every item it creates.
type recordingMiddleware struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (m recordingMiddleware) note(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	*m.log = append(*m.log, s)
}

func (m recordingMiddleware) Create(ctx context.Context, items []CreateExecutionArgs, next func(context.Context, []CreateExecutionArgs) ([]uuid.UUID, error)) ([]uuid.UUID, error) {
	m.note(fmt.Sprintf("%s:create:%d", m.name, len(items)))
	for i := range items {
		md := maps.Clone(items[i].Metadata)
		if md == nil {
			md = map[string]string{}
		}
		md["by-"+m.name] = fmt.Sprint(len(*m.log))
		items[i].Metadata = md
	}
	ids, err := next(ctx, items)
	m.note(m.name + ":created")
	return ids, err
}

type ctxKey string

func (m recordingMiddleware) Run(ctx context.Context, l Lease, next func(context.Context, Lease) ([]byte, error)) ([]byte, error) {
	m.note(m.name + ":run:" + l.Lane)
	trail, _ := ctx.Value(ctxKey("trail")).(string)
	res, err := next(context.WithValue(ctx, ctxKey("trail"), trail+m.name), l)
	m.note(m.name + ":ran")
	return res, err
}

// TestMiddleware: Create wraps CreateExecution, CreateExecutions and
// CreateExecutionsTx, Run wraps every handler RunWorker runs, in the order
// given (the first outermost); the Metadata a Create adds is stored (the
// caller's maps untouched); the handler gets the ctx the innermost Run
// passed on; a middleware may refuse a create.
func TestMiddleware(t *testing.T) {
	conformance(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		var mu sync.Mutex
		var log []string
		reset := func() []string {
			mu.Lock()
			defer mu.Unlock()
			out := log
			log = nil
			return out
		}
		outer, inner := recordingMiddleware{"outer", &mu, &log}, recordingMiddleware{"inner", &mu, &log}
		loc := b.fresh(t)
		s, _ := b.open(t, loc, WithClock(time.Now), WithMiddleware(outer, inner))

		mine := map[string]string{"app": "x"}
		id, err := s.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "one", Metadata: mine})
		must(t, err)
		if got := reset(); !slices.Equal(got, []string{"outer:create:1", "inner:create:1", "inner:created", "outer:created"}) {
			t.Fatalf("CreateExecution: %v", got)
		}
		if len(mine) != 1 {
			t.Fatalf("the caller's metadata was changed: %v", mine)
		}
		e, err := s.GetExecution(ctx, id)
		must(t, err)
		if e.Metadata["app"] != "x" || e.Metadata["by-outer"] != "1" || e.Metadata["by-inner"] != "2" {
			t.Fatalf("stored metadata %v", e.Metadata)
		}
		_, err = s.CreateExecutions(ctx, []CreateExecutionArgs{{Namespace: "ns", Lane: "many"}, {Namespace: "ns", Lane: "many"}})
		must(t, err)
		if got := reset(); !slices.Equal(got, []string{"outer:create:2", "inner:create:2", "inner:created", "outer:created"}) {
			t.Fatalf("CreateExecutions: %v", got)
		}
		if b.shared {
			k := txKinds(b)[0]
			tx := k.begin(t, appURL(t, b, loc))
			ids, err := s.CreateExecutionsTx(ctx, tx.tx, []CreateExecutionArgs{{Namespace: "ns", Lane: "tx"}})
			must(t, err)
			must(t, tx.commit())
			if got := reset(); !slices.Equal(got, []string{"outer:create:1", "inner:create:1", "inner:created", "outer:created"}) {
				t.Fatalf("CreateExecutionsTx: %v", got)
			}
			e, err := s.GetExecution(ctx, ids[0])
			must(t, err)
			if e.Metadata["by-inner"] == "" {
				t.Fatalf("the tx create's metadata %v", e.Metadata)
			}
		}

		trails := make(chan string, 10)
		stop := runWorker(t, s, WorkerArgs{
			Namespace: "ns", WorkerID: "w", InstanceID: "i", Lanes: []string{"one"}, LeaseTTL: 10 * time.Second,
			Handler: func(ctx context.Context, l Lease) ([]byte, error) {
				trail, _ := ctx.Value(ctxKey("trail")).(string)
				trails <- trail
				return nil, errors.New("handler failed")
			},
		})
		select {
		case trail := <-trails:
			if trail != "outerinner" {
				t.Fatalf("the handler's ctx came through %q, want outer then inner", trail)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no run")
		}
		eventually(t, "the run's outcome", func() bool {
			e, err := s.GetExecution(ctx, id)
			return err == nil && e.State == ExecutionFailed
		})
		must(t, stop())
		if got := reset(); !slices.Equal(got, []string{"outer:run:one", "inner:run:one", "inner:ran", "outer:ran"}) {
			t.Fatalf("runs: %v", got)
		}

		// A Create middleware that refuses: its error, nothing written.
		refusing, _ := b.open(t, loc, WithMiddleware(refuse{}))
		_, err = refusing.CreateExecution(ctx, CreateExecutionArgs{Namespace: "refused", Lane: "l"})
		if err == nil || !strings.Contains(err.Error(), "refused by middleware") {
			t.Fatalf("refusing middleware: %v", err)
		}
		page, err := s.ListExecutions(ctx, ListExecutionsArgs{Namespace: "refused"})
		must(t, err)
		if len(page.Executions) != 0 {
			t.Fatal("a refused create wrote")
		}
		// Metadata a middleware adds is validated like the caller's.
		bad, _ := b.open(t, loc, WithMiddleware(badMetadata{}))
		_, err = bad.CreateExecution(ctx, CreateExecutionArgs{Namespace: "ns", Lane: "l"})
		if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), `Metadata[""]`) {
			t.Fatalf("bad metadata from a middleware: %v", err)
		}
	})
}

type refuse struct{}

func (refuse) Create(context.Context, []CreateExecutionArgs, func(context.Context, []CreateExecutionArgs) ([]uuid.UUID, error)) ([]uuid.UUID, error) {
	return nil, errors.New("refused by middleware")
}

func (refuse) Run(ctx context.Context, l Lease, next func(context.Context, Lease) ([]byte, error)) ([]byte, error) {
	return next(ctx, l)
}

type badMetadata struct{ refuse }

func (badMetadata) Create(ctx context.Context, items []CreateExecutionArgs, next func(context.Context, []CreateExecutionArgs) ([]uuid.UUID, error)) ([]uuid.UUID, error) {
	items[0].Metadata = map[string]string{"": "empty key"}
	return next(ctx, items)
}

// TestWithMiddlewareNil: a nil middleware is refused at Open.
func TestWithMiddlewareNil(t *testing.T) {
	_, err := Open(context.Background(), ":memory:", WithMiddleware(nil))
	wantErr(t, err, ErrInvalidInput)
}
