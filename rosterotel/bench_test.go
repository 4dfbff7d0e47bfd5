package rosterotel_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterdb/roster/internal/pgtest"
	"github.com/rosterdb/roster/rosterotel"
	"github.com/rosterdb/roster/service"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// dropSpans is a span processor that keeps nothing: the spans are built and
// ended (every one sampled), then dropped, as an exporter's queue would take
// them.
type dropSpans struct{}

func (dropSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropSpans) Shutdown(context.Context) error                  { return nil }
func (dropSpans) ForceFlush(context.Context) error                { return nil }

// BenchmarkRunWorker: create and run b.N executions (creates in batches of
// 100, no-op handlers, Concurrency 16) through RunWorker, with rosterotel
// recording every span and without any middleware.
func BenchmarkRunWorker(b *testing.B) {
	for _, eng := range []struct {
		name  string
		fresh func(b *testing.B) string
	}{
		{"sqlite", func(b *testing.B) string { return filepath.Join(b.TempDir(), "bench.db") }},
		{"postgres", func(b *testing.B) string { return pgtest.Fresh(b) }},
	} {
		for _, traced := range []bool{false, true} {
			name := eng.name + "/otel=off"
			if traced {
				name = eng.name + "/otel=on"
			}
			b.Run(name, func(b *testing.B) {
				var opts []service.Option
				if traced {
					tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(dropSpans{}))
					opts = append(opts, service.WithMiddleware(rosterotel.New(rosterotel.WithTracerProvider(tp), rosterotel.WithPropagator(propagation.TraceContext{}))))
				}
				ctx := context.Background()
				s, err := service.Open(ctx, eng.fresh(b), opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var done atomic.Int64
				all := make(chan struct{})
				n := int64(b.N)
				runCtx, cancel := context.WithCancel(ctx)
				stopped := make(chan error, 1)
				ready := make(chan struct{})
				go func() {
					stopped <- s.RunWorker(runCtx, service.WorkerArgs{
						Namespace: "bench", WorkerID: "w", InstanceID: "i", Lanes: []string{"l"}, TTL: 10 * time.Second,
						LeaseTTL: 30 * time.Second, Concurrency: 16, Ready: func() { close(ready) },
						Handler: func(context.Context, service.Lease) ([]byte, error) {
							if done.Add(1) == n {
								close(all)
							}
							return nil, nil
						},
					})
				}()
				<-ready
				b.ResetTimer()
				for left := b.N; left > 0; {
					k := min(left, 100)
					items := make([]service.CreateExecutionArgs, k)
					for i := range items {
						items[i] = service.CreateExecutionArgs{Namespace: "bench", Lane: "l"}
					}
					if _, err := s.CreateExecutions(ctx, items); err != nil {
						b.Fatal(err)
					}
					left -= k
				}
				<-all
				b.StopTimer()
				cancel()
				if err := <-stopped; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
