package main

import (
	"testing"
	"time"

	"github.com/rosterdb/roster/service"
)

// TestCharts: the last hour only, per lane, on one scale for every lane
// (the busiest minute's finished count; the highest ready sample), the
// current minute rightmost; ready samples older than the hour forgotten.
func TestCharts(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 30, 20, 0, time.UTC)
	minute := func(m int) time.Time { return at.Truncate(time.Minute).Add(time.Duration(m) * time.Minute) }
	finished := []service.LaneMinute{
		{Namespace: "ns", Lane: "a", Minute: minute(-60), Completed: 9}, // out of the hour
		{Namespace: "ns", Lane: "a", Minute: minute(-59), Completed: 1},
		{Namespace: "ns", Lane: "a", Minute: minute(0), Completed: 2, Failed: 2},
		{Namespace: "ns", Lane: "b", Minute: minute(-1), Failed: 1},
	}
	samples := newReadySamples()
	samples.note(service.Stats{At: at.Add(-61 * time.Minute), Namespaces: []service.NamespaceStats{{Namespace: "ns", Lanes: []service.LaneStats{{Lane: "c", Ready: 50}}}}})
	samples.note(service.Stats{At: at, Namespaces: []service.NamespaceStats{{Namespace: "ns", Lanes: []service.LaneStats{{Lane: "b", Ready: 3}, {Lane: "c", Ready: 6}}}}})
	got, finishedMax, readyMax := charts(at, finished, samples.lanes())
	if finishedMax != 4 || readyMax != 6 {
		t.Fatalf("scales: %d finished, %d ready; want 4 and 6 (the hour's maxima, not the old sample of 50)", finishedMax, readyMax)
	}
	if len(got) != 3 || got[0].Lane != "a" || got[1].Lane != "b" || got[2].Lane != "c" {
		t.Fatalf("lanes: %+v", got)
	}
	a := got[0]
	if a.Completed != 3 || a.Failed != 2 || len(a.Bars) != 2 || a.Bars[0].X != 0 || a.Bars[1].X != (chartMinutes-1)*chartColumn {
		t.Fatalf("lane a: %+v", a)
	}
	if bar := a.Bars[1]; bar.CompletedH != chartHeight/2 || bar.FailedH != chartHeight/2 || bar.FailedY != 0 {
		t.Fatalf("lane a's last minute, 4 of 4 (2 completed under 2 failed): %+v", bar)
	}
	if c := got[2]; len(c.Dots) != 1 || c.Dots[0].Y != 3 || c.Completed != 0 || *c.Minutes[0].Ready != 6 {
		t.Fatalf("lane c: one sample at the top (6 of 6): %+v", c)
	}
	// Lane c had a sample 61 minutes ago: forgotten at the next note.
	if m := samples.lanes()[[2]string{"ns", "c"}]; len(m) != 1 {
		t.Fatalf("lane c's samples: %v, want this minute's only", m)
	}
}
