package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rosterdb/roster/service"
)

// chartMinutes is how many minutes a chart shows: the last hour, the
// current minute included.
const chartMinutes = 60

// Chart geometry: one column per minute.
const (
	chartColumn = 4 // px per minute
	chartHeight = 40
)

// readySamples keeps in memory, per lane, the ready count of each of the
// last chartMinutes minutes (the latest sample taken in it): roster serve
// samples at every read of the page or its JSON, and writes nothing.
type readySamples struct {
	mu     sync.Mutex
	byLane map[[2]string]map[int64]int // (namespace, lane) -> Unix minute -> ready
}

func newReadySamples() *readySamples {
	return &readySamples{byLane: map[[2]string]map[int64]int{}}
}

// note records st's ready counts at its minute, and forgets minutes older
// than the chart's.
func (r *readySamples) note(st service.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := st.At.Unix() / 60
	seen := map[[2]string]bool{}
	for _, ns := range st.Namespaces {
		for _, l := range ns.Lanes {
			k := [2]string{ns.Namespace, l.Lane}
			seen[k] = true
			if r.byLane[k] == nil {
				r.byLane[k] = map[int64]int{}
			}
			r.byLane[k][now] = l.Ready
		}
	}
	for k, m := range r.byLane {
		if !seen[k] {
			m[now] = 0 // nothing live: nothing ready
		}
		for minute := range m {
			if minute <= now-chartMinutes {
				delete(m, minute)
			}
		}
		if len(m) == 0 {
			delete(r.byLane, k)
		}
	}
}

// lanes returns a copy of the samples.
func (r *readySamples) lanes() map[[2]string]map[int64]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[[2]string]map[int64]int, len(r.byLane))
	for k, m := range r.byLane {
		c := make(map[int64]int, len(m))
		for minute, n := range m {
			c[minute] = n
		}
		out[k] = c
	}
	return out
}

// chartMinute is one minute of a lane's chart.
type chartMinute struct {
	Minute    time.Time `json:"minute"`
	Completed int       `json:"completed"`
	Failed    int       `json:"failed"`
	Ready     *int      `json:"ready"` // null: not sampled in that minute
}

// laneChart is one lane's last hour: its minutes (JSON) and the SVG shapes
// drawn from them on the page's common scales.
type laneChart struct {
	Namespace string        `json:"namespace"`
	Lane      string        `json:"lane"`
	Minutes   []chartMinute `json:"minutes"` // the minutes with anything, oldest first
	Completed int           `json:"completed"`
	Failed    int           `json:"failed"`

	Bars        []chartBar `json:"-"`
	Dots        []chartDot `json:"-"`
	ReadyPoints string     `json:"-"` // an SVG polyline's points
}

// chartBar is a minute's stacked completions (bottom) and failures.
type chartBar struct {
	X                      int
	CompletedY, CompletedH float64
	FailedY, FailedH       float64
	Completed, Failed      int
	Label                  string
}

// chartDot is a minute's ready sample.
type chartDot struct {
	X, Y  float64
	Label string
}

// charts builds every lane's chart ending at the minute of at, from the
// finished counts and the ready samples, on two scales shared by all
// lanes: finished per minute and ready. It returns them ordered by
// (namespace, lane) with the two scales' maxima.
func charts(at time.Time, finished []service.LaneMinute, ready map[[2]string]map[int64]int) ([]laneChart, int, int) {
	now := at.Unix() / 60
	first := now - chartMinutes + 1
	type acc struct {
		done, failed map[int64]int
		ready        map[int64]int
	}
	byLane := map[[2]string]*acc{}
	get := func(k [2]string) *acc {
		if byLane[k] == nil {
			byLane[k] = &acc{done: map[int64]int{}, failed: map[int64]int{}}
		}
		return byLane[k]
	}
	for _, m := range finished {
		minute := m.Minute.Unix() / 60
		if minute < first || minute > now {
			continue
		}
		a := get([2]string{m.Namespace, m.Lane})
		a.done[minute] += m.Completed
		a.failed[minute] += m.Failed
	}
	for k, m := range ready {
		get(k).ready = m
	}
	finishedMax, readyMax := 1, 1
	for _, a := range byLane {
		for minute := first; minute <= now; minute++ {
			finishedMax = max(finishedMax, a.done[minute]+a.failed[minute])
			readyMax = max(readyMax, a.ready[minute])
		}
	}
	var out []laneChart
	for k, a := range byLane {
		c := laneChart{Namespace: k[0], Lane: k[1]}
		var points []string
		for minute := first; minute <= now; minute++ {
			done, failed := a.done[minute], a.failed[minute]
			r, sampled := a.ready[minute]
			if done == 0 && failed == 0 && !sampled {
				continue
			}
			cm := chartMinute{Minute: time.Unix(minute*60, 0).UTC(), Completed: done, Failed: failed}
			label := cm.Minute.Format("15:04")
			x := int(minute-first) * chartColumn
			if sampled {
				r := r
				cm.Ready = &r
				y := chartHeight - 3 - float64(r)/float64(readyMax)*(chartHeight-6) // inside the frame, dot and all
				c.Dots = append(c.Dots, chartDot{X: float64(x) + chartColumn/2, Y: y, Label: fmt.Sprintf("%s: %d ready", label, r)})
				points = append(points, fmt.Sprintf("%g,%g", float64(x)+chartColumn/2, y))
			}
			if done+failed > 0 {
				hd := float64(done) / float64(finishedMax) * chartHeight
				hf := float64(failed) / float64(finishedMax) * chartHeight
				c.Bars = append(c.Bars, chartBar{X: x, CompletedY: chartHeight - hd, CompletedH: hd, FailedY: chartHeight - hd - hf, FailedH: hf,
					Completed: done, Failed: failed, Label: fmt.Sprintf("%s: %d completed, %d failed", label, done, failed)})
			}
			c.Completed += done
			c.Failed += failed
			c.Minutes = append(c.Minutes, cm)
		}
		if len(points) > 1 {
			c.ReadyPoints = strings.Join(points, " ")
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Lane < out[j].Lane
	})
	return out, finishedMax, readyMax
}
