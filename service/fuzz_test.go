package service

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// Fuzzed identifiers never panic, never leak a driver error, and either are
// refused with ErrInvalidInput (writing nothing) or round-trip exactly.
func FuzzRegisterWorker(f *testing.F) {
	for _, seed := range [][4]string{
		{"ns", "i", "a", "b"},
		{"", "i", "a", "a"},
		{"n\x00s", "i", "a,b", "c"},
		{"ünï", "ínst", "[\"x\"]", "\\u0000"},
		{"ns", "\xff", "a", "b"},
		{"ns", "i", "a\u2028b", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	s, _ := newStore(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, ns, inst, lane1, lane2 string) {
		_, err := s.RegisterWorker(ctx, RegisterWorkerArgs{
			Namespace: ns, WorkerID: "w", InstanceID: inst, Lanes: []string{lane1, lane2}, TTL: time.Hour, Now: t0,
		})
		valid := fuzzIdentifier(ns) && fuzzIdentifier(inst) && fuzzIdentifier(lane1) && fuzzIdentifier(lane2)
		if !valid {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("invalid input accepted or mis-reported: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid input refused: %v", err)
		}
		w, err := s.GetWorker(ctx, ns, inst)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{lane1, lane2}
		slices.Sort(want)
		want = slices.Compact(want)
		if !slices.Equal(w.Lanes, want) || w.Namespace != ns || w.InstanceID != inst {
			t.Fatalf("round trip: %+v, want lanes %q", w, want)
		}
	})
}

// fuzzIdentifier restates the identifier rule independently of validate.go.
func fuzzIdentifier(s string) bool {
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// Fuzzed cursors never panic: every list accepts its own cursors and refuses
// anything else with ErrInvalidInput.
func FuzzCursors(f *testing.F) {
	for _, seed := range []string{"", "x", "e30", "WyJ3b3JrZXJzIiwiYSIsImIiXQ", encodeCursor(agentsCursor, "a"),
		encodeCursor(leasesCursor, 5, "0190c0de-0000-7000-8000-000000000000"), encodeCursor(leasesCursor, "5", 5)} {
		f.Add(seed)
	}
	s, _ := newStore(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, cursor string) {
		_, err1 := s.ListWorkers(ctx, ListWorkersArgs{After: cursor})
		_, err2 := s.ListAgents(ctx, ListAgentsArgs{After: cursor})
		_, err3 := s.ListExpiredLeases(ctx, ListExpiredLeasesArgs{After: cursor})
		for _, err := range []error{err1, err2, err3} {
			if err != nil && !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("cursor %q: %v", cursor, err)
			}
		}
	})
}
