package engine

import (
	"strconv"
	"testing"
)

// A WorkerSet holds up to KeySetMax workers; one it holds put in again
// changes nothing; one more and it keeps only that one; a worker taken out
// is no longer in it.
func TestWorkerSetBounded(t *testing.T) {
	var s WorkerSet
	key := func(i int) WorkerKey { return WorkerKey{Namespace: "ns", InstanceID: strconv.Itoa(i)} }
	if s.Has(key(0)) || s.Len() != 0 {
		t.Fatal("the zero set is not empty")
	}
	for i := range KeySetMax {
		s.Set(key(i), true)
	}
	if !s.Has(key(0)) || !s.Has(key(KeySetMax-1)) || s.Len() != KeySetMax {
		t.Fatalf("%d remembered, want %d", s.Len(), KeySetMax)
	}
	s.Set(key(0), true) // already in: the full set stays as it is
	if s.Len() != KeySetMax || !s.Has(key(1)) {
		t.Fatalf("putting in a worker it holds left %d of %d", s.Len(), KeySetMax)
	}
	s.Set(key(KeySetMax), true)
	if s.Len() != 1 || !s.Has(key(KeySetMax)) || s.Has(key(0)) {
		t.Fatalf("past the bound: %d remembered, want only the newest", s.Len())
	}
	s.Set(key(KeySetMax), false)
	if s.Has(key(KeySetMax)) || s.Len() != 0 {
		t.Fatal("a worker taken out is still in the set")
	}
}
