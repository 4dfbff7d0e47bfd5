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
// every namespace), armed or not, keeps one pending signal each, and calls
// OnArmed and OnDisarmed around its armed subscriptions.
func TestHub(t *testing.T) {
	var armed, disarmed int
	h := &Hub{OnArmed: func() { armed++ }, OnDisarmed: func() { disarmed++ }}
	a, b, all := h.Subscribe("a"), h.Subscribe("b"), h.Subscribe("")
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
	if armed != 0 {
		t.Fatal("OnArmed ran with no subscription armed")
	}
	a.Arm()
	a.Arm()
	b.Arm()
	if armed != 1 {
		t.Fatalf("OnArmed ran %d times", armed)
	}
	a.Disarm()
	b.Close()
	if disarmed != 1 {
		t.Fatalf("OnDisarmed ran %d times after the last armed subscription closed", disarmed)
	}
	all.Arm()
	all.Close()
	all.Close()
	a.Close()
	if armed != 2 || disarmed != 2 || h.Len() != 0 {
		t.Fatalf("OnArmed %d, OnDisarmed %d, %d open", armed, disarmed, h.Len())
	}
}

// TestFlags: a generated boolean round-trips, and SQLite's is 0 or 1.
func TestFlags(t *testing.T) {
	for _, b := range []bool{false, true} {
		if got := flagOf(flagFor[bool](b)); got != b {
			t.Errorf("bool flag of %v: %v", b, got)
		}
		if got := flagOf(flagFor[int64](b)); got != b {
			t.Errorf("int64 flag of %v: %v", b, got)
		}
	}
	if f := flagFor[int64](true); f != 1 {
		t.Errorf("flagFor[int64](true) = %d, want 1", f)
	}
	if flagOf(int64(7)) != true {
		t.Error("a non-zero integer flag is true")
	}
}
