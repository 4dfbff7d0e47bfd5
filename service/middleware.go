package service

import (
	"context"
	"slices"

	"github.com/google/uuid"
)

// Middleware wraps the creation and the runs of executions: to carry a
// trace context in Metadata, log, or check. Package rosterotel is one.
type Middleware interface {
	// Create wraps every CreateExecution, CreateExecutions and
	// CreateExecutionsTx call (one item or many); it may add Metadata to the
	// items (on maps of its own: the caller's are not to be changed) and
	// must call next at most once.
	Create(ctx context.Context, items []CreateExecutionArgs, next func(context.Context, []CreateExecutionArgs) ([]uuid.UUID, error)) ([]uuid.UUID, error)
	// Run wraps every handler run by RunWorker; the ctx it passes to next is
	// the handler's.
	Run(ctx context.Context, l Lease, next func(context.Context, Lease) ([]byte, error)) ([]byte, error)
}

// WithMiddleware adds middleware to the Store, applied in the order given:
// the first is the outermost. Without any, creates and runs cost nothing
// extra.
func WithMiddleware(m ...Middleware) Option {
	return func(c *config) { c.middleware = append(c.middleware, m...) }
}

// createFunc is a create of a batch, as the Create middleware sees it.
type createFunc = func(context.Context, []CreateExecutionArgs) ([]uuid.UUID, error)

// createMiddleware runs create through the Store's Create middleware, the
// first outermost, on a copy of items (so that a middleware that adds
// Metadata changes no slice of the caller's).
func (s *Store) createMiddleware(ctx context.Context, items []CreateExecutionArgs, create createFunc) ([]uuid.UUID, error) {
	next := create
	for i := len(s.cfg.middleware) - 1; i >= 0; i-- {
		m, inner := s.cfg.middleware[i], next
		next = func(ctx context.Context, items []CreateExecutionArgs) ([]uuid.UUID, error) {
			return m.Create(ctx, items, inner)
		}
	}
	return next(ctx, slices.Clone(items))
}

// runMiddleware runs handler through the Store's Run middleware, the first
// outermost.
func (s *Store) runMiddleware(ctx context.Context, l Lease, handler func(context.Context, Lease) ([]byte, error)) ([]byte, error) {
	next := handler
	for i := len(s.cfg.middleware) - 1; i >= 0; i-- {
		m, inner := s.cfg.middleware[i], next
		next = func(ctx context.Context, l Lease) ([]byte, error) { return m.Run(ctx, l, inner) }
	}
	return next(ctx, l)
}
