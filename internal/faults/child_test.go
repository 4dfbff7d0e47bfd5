package faults

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rosterdb/roster/service"
)

// The worker process of the trials: this test binary, run again with
// childEnv set. It runs RunWorker on the database of childDB until SIGTERM
// (a clean shutdown) or SIGKILL, and writes a ledger of every handler run.

const (
	childEnv        = "ROSTER_FAULT_CHILD"
	childDB         = "ROSTER_FAULT_DB"
	childInstance   = "ROSTER_FAULT_INSTANCE"
	childLedger     = "ROSTER_FAULT_LEDGER"
	childTTL        = "ROSTER_FAULT_TTL"
	childLeaseTTL   = "ROSTER_FAULT_LEASE_TTL"
	childClockJump  = "ROSTER_FAULT_CLOCK_JUMP"
	childLongEvery  = "ROSTER_FAULT_LONG_EVERY"
	childLongFrom   = "ROSTER_FAULT_LONG_FROM"
	childLongUntil  = "ROSTER_FAULT_LONG_UNTIL"
	childLongFor    = "ROSTER_FAULT_LONG_FOR"
	childConcurrent = 8
)

// Ledger records, one line each, space-separated:
//
//	start <execution> <epoch> <lease> <unix ns>
//	end <execution> <epoch> <lease> <unix ns>
//	cancel <execution> <epoch> <lease> <unix ns> <cause>
//	written <execution> <epoch> <lease> <unix ns> <failed>  (the runtime wrote the outcome: acknowledged)
//	raw <message>        (an error that is none of roster's sentinels)
//	exit <error or ok>
//
// A handler's result names its run: "<instance> <epoch> <lease>", so that
// the result an execution kept says which run it came from.
type ledger struct {
	mu sync.Mutex
	f  *os.File
}

func (l *ledger) write(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.f, format+"\n", args...)
}

// rawCatcher is a slog handler that records every logged "err" that is not
// one of roster's sentinels (a handler's own error is under "handler_err")
// in a record of Warn and above, which it passes on, and every outcome the
// runtime says it wrote (a Debug record).
type rawCatcher struct {
	slog.Handler
	l *ledger
}

// Enabled lets the runtime's Debug records through: the outcomes written
// are among them.
func (h rawCatcher) Enabled(context.Context, slog.Level) bool { return true }

func (h rawCatcher) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "roster: worker: outcome written" {
		var execution, lease any
		var epoch int64
		failed := false
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "execution":
				execution = a.Value.Any()
			case "lease":
				lease = a.Value.Any()
			case "epoch":
				epoch = a.Value.Int64()
			case "failed":
				failed = a.Value.Bool()
			}
			return true
		})
		h.l.write("written %v %d %v %d %v", execution, epoch, lease, r.Time.UnixNano(), failed)
		return nil
	}
	if r.Level < slog.LevelWarn {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" {
			return true
		}
		if err, ok := a.Value.Any().(error); ok && !service.IsSentinel(err) {
			h.l.write("raw %q: %v", r.Message, err)
		}
		return true
	})
	return h.Handler.Handle(ctx, r)
}

func (h rawCatcher) WithAttrs(as []slog.Attr) slog.Handler {
	return rawCatcher{Handler: h.Handler.WithAttrs(as), l: h.l}
}

func (h rawCatcher) WithGroup(name string) slog.Handler {
	return rawCatcher{Handler: h.Handler.WithGroup(name), l: h.l}
}

func envDuration(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(name))
	return d
}

// childWorker is the worker process's main.
func childWorker() int {
	f, err := os.OpenFile(os.Getenv(childLedger), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	led := &ledger{f: f}
	logger := slog.New(rawCatcher{Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), l: led})
	opts := []service.Option{service.WithLogger(logger)}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGUSR1)
	var offset atomic.Int64
	if jump := envDuration(childClockJump); jump > 0 {
		// The whole fleet's clock jumps forward by jump at each SIGUSR1.
		opts = append(opts, service.WithClock(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }))
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for s := range signals {
			if s == syscall.SIGUSR1 {
				offset.Add(int64(envDuration(childClockJump)))
				continue
			}
			cancel()
		}
	}()
	s, err := service.Open(ctx, os.Getenv(childDB), opts...)
	if err != nil {
		led.write("exit open: %v", err)
		return 1
	}
	defer s.Close()
	longEvery, _ := strconv.Atoi(os.Getenv(childLongEvery))
	longFrom, _ := strconv.Atoi(os.Getenv(childLongFrom))
	longUntil, _ := strconv.Atoi(os.Getenv(childLongUntil))
	instance := os.Getenv(childInstance)
	longFor := envDuration(childLongFor)
	err = s.RunWorker(ctx, service.WorkerArgs{
		Namespace: "trial", WorkerID: "worker", InstanceID: instance,
		Lanes: []string{"work", "probe-" + instance},
		TTL:   envDuration(childTTL), LeaseTTL: envDuration(childLeaseTTL), Concurrency: childConcurrent,
		Ready: func() { fmt.Println("ready") },
		Handler: func(ctx context.Context, l service.Lease) ([]byte, error) {
			led.write("start %s %d %s %d", l.ExecutionID, l.Epoch, l.LeaseID, time.Now().UnixNano())
			d := time.Duration(1+rand.IntN(20)) * time.Millisecond
			if n, err := strconv.Atoi(string(l.Payload)); err == nil && longEvery > 0 && n%longEvery == 0 &&
				n >= longFrom && n <= longUntil && l.Epoch == 1 {
				d = longFor
			}
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				led.write("end %s %d %s %d", l.ExecutionID, l.Epoch, l.LeaseID, time.Now().UnixNano())
				return []byte(fmt.Sprintf("%s %d %s", instance, l.Epoch, l.LeaseID)), nil
			case <-ctx.Done():
				led.write("cancel %s %d %s %d %q", l.ExecutionID, l.Epoch, l.LeaseID, time.Now().UnixNano(), context.Cause(ctx))
				return nil, ctx.Err()
			}
		},
	})
	if err != nil {
		led.write("exit %v", err)
		return 1
	}
	led.write("exit ok")
	return 0
}
