package engine

import "sync"

// KeySet is a bounded set of keys an engine or a Store remembers something
// of. Past KeySetMax it forgets them all and keeps only the newest (putting
// in one it holds changes nothing): what it holds is a hint, and forgetting
// costs one operation the slower way. The zero value is empty and ready to
// use.
type KeySet[K comparable] struct {
	mu sync.Mutex
	m  map[K]struct{}
}

// KeySetMax bounds the keys a KeySet remembers.
const KeySetMax = 4096

// Has tells whether k is in the set.
func (s *KeySet[K]) Has(k K) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[k]
	return ok
}

// Set puts k in the set (in) or takes it out.
func (s *KeySet[K]) Set(k K, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, has := s.m[k]
	switch {
	case !in:
		delete(s.m, k)
	case has:
	case s.m == nil || len(s.m) >= KeySetMax:
		s.m = map[K]struct{}{k: {}}
	default:
		s.m[k] = struct{}{}
	}
}

// Len is how many keys the set holds.
func (s *KeySet[K]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// WorkerSet is a bounded set of workers (SQLite: whose last claim took
// something; PostgreSQL: whose last claim was a flow claim). Instances come
// and go: it forgets past KeySetMax.
type WorkerSet = KeySet[WorkerKey]
