package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// LogLimiter rate-limits log records that a failing database would repeat
// many times a second (a full disk fails every commit): per message, at most
// one record per interval, the next one saying how many were held back.
type LogLimiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]*limitState
}

type limitState struct {
	last       time.Time
	suppressed int
}

// NewLogLimiter returns a limiter that passes one record per message and
// interval.
func NewLogLimiter(every time.Duration) *LogLimiter {
	return &LogLimiter{every: every, now: time.Now, seen: map[string]*limitState{}}
}

// allow reports whether a record with this message may be logged now, and
// how many were held back since the last one that was.
func (l *LogLimiter) allow(msg string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	st, ok := l.seen[msg]
	if !ok {
		l.seen[msg] = &limitState{last: now}
		return true, 0
	}
	if now.Sub(st.last) < l.every {
		st.suppressed++
		return false, 0
	}
	n := st.suppressed
	st.last, st.suppressed = now, 0
	return true, n
}

// Log logs msg at level through logger unless a record with the same message
// was logged less than the interval ago.
func (l *LogLimiter) Log(logger *slog.Logger, level slog.Level, msg string, args ...any) {
	if !logger.Enabled(context.Background(), level) {
		return
	}
	ok, held := l.allow(msg)
	if !ok {
		return
	}
	if held > 0 {
		args = append(args, "repeats_not_logged", held)
	}
	logger.Log(context.Background(), level, msg, args...)
}
