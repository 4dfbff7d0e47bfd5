package engine

import "sync"

// WorkerSet is a bounded set of workers an engine remembers something of
// (SQLite: whose last claim took something; PostgreSQL: whose last claim
// was a flow claim). Instances come and go, so past WorkerSetMax it forgets
// them all and keeps only the newest (putting in one it holds changes
// nothing): forgetting costs a worker one claim the slower way. The zero value is empty and ready to use.
type WorkerSet struct {
	mu sync.Mutex
	m  map[WorkerKey]struct{}
}

// WorkerSetMax bounds the workers a WorkerSet remembers.
const WorkerSetMax = 4096

// Has tells whether k is in the set.
func (s *WorkerSet) Has(k WorkerKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[k]
	return ok
}

// Set puts k in the set (in) or takes it out.
func (s *WorkerSet) Set(k WorkerKey, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, has := s.m[k]
	switch {
	case !in:
		delete(s.m, k)
	case has:
	case s.m == nil || len(s.m) >= WorkerSetMax:
		s.m = map[WorkerKey]struct{}{k: {}}
	default:
		s.m[k] = struct{}{}
	}
}

// Len is how many workers the set holds.
func (s *WorkerSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
