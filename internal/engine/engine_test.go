package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A failure repeated many times a second (a full disk fails every commit)
// logs once per interval, the next record counting what was held back.
func TestLogLimiter(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(0, 0)
	l := NewLogLimiter(10 * time.Second)
	l.now = func() time.Time { return now }
	for i := range 837 {
		l.Log(logger, slog.LevelError, "commit failed", "i", i)
		l.Log(logger, slog.LevelError, "another failure")
		now = now.Add(10 * time.Millisecond) // 8.37 s in all
	}
	if n := strings.Count(buf.String(), "commit failed"); n != 1 {
		t.Fatalf("%d records in 8.37 s:\n%s", n, buf.String())
	}
	if n := strings.Count(buf.String(), "another failure"); n != 1 {
		t.Fatalf("a second message shares the first one's budget: %d records", n)
	}
	now = now.Add(2 * time.Second)
	l.Log(logger, slog.LevelError, "commit failed")
	if !strings.Contains(buf.String(), "repeats_not_logged=836") {
		t.Fatalf("the record after the interval does not count the held-back ones:\n%s", buf.String())
	}
}

// A hub wakes the subscriptions of the namespace signalled (and those of
// every namespace), coalesces signals, and calls OnFirst and OnLast around
// its subscriptions.
func TestHub(t *testing.T) {
	var first, last int
	h := &Hub{OnFirst: func() { first++ }, OnLast: func() { last++ }}
	a, b, all := h.Subscribe("a"), h.Subscribe("b"), h.Subscribe("")
	if first != 1 {
		t.Fatalf("OnFirst ran %d times", first)
	}
	h.Signal("a")
	h.Signal("a")
	woken := func(s Subscription) bool {
		select {
		case <-s.C():
			return true
		default:
			return false
		}
	}
	if !woken(a) || woken(a) || woken(b) || !woken(all) {
		t.Fatal("a signal of namespace a woke the wrong subscriptions, or twice")
	}
	h.Signal("")
	if !woken(a) || !woken(b) || !woken(all) {
		t.Fatal("a signal of every namespace missed a subscription")
	}
	a.Close()
	b.Close()
	if last != 0 {
		t.Fatal("OnLast ran with a subscription open")
	}
	all.Close()
	all.Close()
	if last != 1 || h.Len() != 0 {
		t.Fatalf("OnLast ran %d times, %d open", last, h.Len())
	}
}
