// Package rosterotel traces roster's executions with OpenTelemetry, as a
// service.Middleware, following the OpenTelemetry semantic conventions for
// messaging:
//
//   - every create (CreateExecution, CreateExecutions, CreateExecutionsTx)
//     is a span "create <lane>" of kind PRODUCER, a child of the span in the
//     caller's ctx (a batch is one span, with messaging.batch.message_count;
//     a single item's carries messaging.message.id, the execution id);
//   - the create span's context travels in the execution's Metadata (W3C
//     traceparent and tracestate, through the propagator);
//   - every run RunWorker makes is a span "process <lane>" of kind CONSUMER,
//     with a Link to the create span (in whatever process runs it, however
//     long after), roster.attempt (the Lease's AttemptIndex) and
//     roster.epoch; the handler's ctx carries it, so the handler's own spans
//     nest under it; a failed run (an error or a panic) sets the span's
//     status to Error with the error's text; a snooze is no failure.
//
// Both carry messaging.system "roster", messaging.operation.type ("create",
// "process"), messaging.destination.name (the lane) and roster.namespace.
// Importing package service pulls in no OpenTelemetry: only this package
// does.
package rosterotel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"
	"github.com/rosterdb/roster/service"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/rosterdb/roster/rosterotel"

// The attribute keys of the spans.
const (
	keySystem       = attribute.Key("messaging.system")
	keyOperation    = attribute.Key("messaging.operation.type")
	keyDestination  = attribute.Key("messaging.destination.name")
	keyMessageID    = attribute.Key("messaging.message.id")
	keyBatchCount   = attribute.Key("messaging.batch.message_count")
	keyNamespace    = attribute.Key("roster.namespace")
	keyAttempt      = attribute.Key("roster.attempt")
	keyEpoch        = attribute.Key("roster.epoch")
	systemName      = "roster"
	operationCreate = "create"
	operationRun    = "process"
)

// Option configures New.
type Option func(*middleware)

// WithTracerProvider sets the tracer provider (default: the global one,
// otel.GetTracerProvider(), as it is at each span).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(m *middleware) { m.tp = tp }
}

// WithPropagator sets the propagator that carries the create span's
// context in Metadata (default: the global one, otel.GetTextMapPropagator(),
// as it is at each span; set it to propagation.TraceContext{}, or a
// composite holding it, for the W3C traceparent and tracestate).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(m *middleware) { m.prop = p }
}

// New returns the tracing middleware, for service.WithMiddleware.
func New(opts ...Option) service.Middleware {
	m := &middleware{}
	for _, o := range opts {
		o(m)
	}
	return m
}

type middleware struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

func (m *middleware) tracer() trace.Tracer {
	tp := m.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

func (m *middleware) propagator() propagation.TextMapPropagator {
	if m.prop != nil {
		return m.prop
	}
	return otel.GetTextMapPropagator()
}

// Create traces a create: one PRODUCER span, whose context it adds to each
// item's Metadata (a copy: the caller's map is left as it was).
func (m *middleware) Create(ctx context.Context, items []service.CreateExecutionArgs, next func(context.Context, []service.CreateExecutionArgs) ([]uuid.UUID, error)) ([]uuid.UUID, error) {
	if len(items) == 0 {
		return next(ctx, items)
	}
	lane, namespace := items[0].Lane, items[0].Namespace
	for _, it := range items[1:] {
		if it.Lane != lane {
			lane = ""
		}
		if it.Namespace != namespace {
			namespace = ""
		}
	}
	name := operationCreate
	attrs := []attribute.KeyValue{keySystem.String(systemName), keyOperation.String(operationCreate)}
	if lane != "" {
		name += " " + lane
		attrs = append(attrs, keyDestination.String(lane))
	}
	if namespace != "" {
		attrs = append(attrs, keyNamespace.String(namespace))
	}
	if len(items) > 1 {
		attrs = append(attrs, keyBatchCount.Int(len(items)))
	}
	ctx, span := m.tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	defer span.End()
	carrier := propagation.MapCarrier{}
	m.propagator().Inject(ctx, carrier)
	if len(carrier) > 0 {
		for i := range items {
			md := maps.Clone(items[i].Metadata)
			if md == nil {
				md = make(map[string]string, len(carrier))
			}
			maps.Copy(md, carrier)
			items[i].Metadata = md
		}
	}
	ids, err := next(ctx, items)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return ids, err
	}
	if len(items) == 1 && len(ids) == 1 {
		span.SetAttributes(keyMessageID.String(ids[0].String()))
	}
	return ids, nil
}

// snoozer is what a service.Snooze error answers to.
type snoozer interface{ SnoozeFor() time.Duration }

// Run traces a run: one CONSUMER span, linked to the create span whose
// context the execution's Metadata carries; the handler's ctx holds it.
func (m *middleware) Run(ctx context.Context, l service.Lease, next func(context.Context, service.Lease) ([]byte, error)) (result []byte, err error) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			keySystem.String(systemName), keyOperation.String(operationRun), keyDestination.String(l.Lane),
			keyMessageID.String(l.ExecutionID.String()), keyNamespace.String(l.Namespace),
			keyAttempt.Int(l.AttemptIndex), keyEpoch.Int64(l.Epoch),
		),
	}
	if len(l.Metadata) > 0 {
		created := trace.SpanContextFromContext(m.propagator().Extract(context.Background(), propagation.MapCarrier(l.Metadata)))
		if created.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: created}))
		}
	}
	ctx, span := m.tracer().Start(ctx, operationRun+" "+l.Lane, opts...)
	defer func() {
		if p := recover(); p != nil {
			span.SetStatus(codes.Error, fmt.Sprintf("panic: %v", p))
			span.End()
			panic(p)
		}
		var sn snoozer
		switch {
		case err == nil:
		case errors.As(err, &sn):
			span.AddEvent("snoozed", trace.WithAttributes(attribute.Int64("roster.snooze_ms", sn.SnoozeFor().Milliseconds())))
		default:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	return next(ctx, l)
}
