package service

import (
	"context"
	"errors"
	"time"
)

// keepAlive is the heart: it heartbeats at about TTL/3 until stop. A
// heartbeat (or a claim) that finds the registration lapsed stops claims
// while it registers again; running handlers go on, since their leases may
// well hold. Transient failures are retried sooner, with backoff.
func (w *runner) keepAlive(stop <-chan struct{}) {
	every := max(w.a.TTL/3, time.Millisecond)
	wait := jitter(every)
	var b backoff
	for {
		relapsed := false
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-w.relapse:
			relapsed = true
		case <-t.C:
		}
		t.Stop()
		var err error
		if !relapsed {
			_, err = w.s.HeartbeatWorker(context.Background(), HeartbeatWorkerArgs{Namespace: w.a.Namespace, InstanceID: w.a.InstanceID})
			if err == nil {
				// A heartbeat proves the registration, even one whose
				// register reported a failure it had not (the connection
				// broke after the commit).
				w.setRegistered(true)
				w.answered()
			}
		}
		if relapsed || errors.Is(err, ErrNotRegistered) {
			w.setRegistered(false)
			if err = w.register(context.Background()); err == nil {
				w.log.Info("roster: worker: the registration had lapsed; registered again")
				w.setRegistered(true)
			}
		}
		switch {
		case err == nil:
			b.reset()
			wait = jitter(every)
		case errors.Is(err, ErrClosed):
			return
		default:
			w.warn("roster: worker: heartbeat failed; will retry", "err", err)
			wait = min(every, b.next())
		}
	}
}
