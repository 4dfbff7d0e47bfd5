// Package metrics exports a roster Store to Prometheus
// (github.com/prometheus/client_golang): counters and histograms of what
// this process's Store did, heard through service.Observer, and, once told
// to with Watch, the fleet's gauges read from Store.Stats at each scrape. It
// is a package of its own so that importing service alone pulls no metrics
// dependency.
//
//	c := metrics.New()
//	store, err := service.Open(ctx, path, service.WithObserver(c))
//	prometheus.MustRegister(c)
//	c.Watch(store) // in one process per fleet only, or scrape 'roster serve'
//
// Counters count the process that serves them: sum them across targets. So
// do the histograms roster_queue_wait_seconds (from an execution's RunAt to
// its claim) and roster_run_seconds (a RunWorker handler's run), by
// namespace and lane, from the processes that claim and run the work.
// Gauges describe the whole fleet (every process sees the same database): a
// Collector exports them only after Watch, so that summing targets does not
// count the fleet twice; 'roster serve' watches. A lane or namespace that
// was reported once keeps reading 0 when nothing is live in it, instead of
// dropping out.
//
// With the gauges, a watching Collector exports roster_lane_finished_total
// by namespace, lane and outcome (completed, or failed for good): the whole
// fleet's finished executions, read from the database's last hour at each
// scrape and counted from the first scrape on, so that rate() and
// increase() over it alert on a lane's failures whichever process ran them.
//
// roster_stats_errors_total counts the scrapes whose Stats or finished
// executions read failed (those metrics are then missing from that scrape).
package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rosterdb/roster/service"
)

// Collector is a prometheus.Collector and a service.Observer.
type Collector struct {
	store   atomic.Pointer[service.Store]
	timeout time.Duration

	claims, completions, failures          *prometheus.CounterVec // by namespace and lane
	leasesLost, reclaims, swept, overloads prometheus.Counter
	leaderChanges, scheduleRuns            prometheus.Counter
	scrapeErrors                           prometheus.Counter
	claimsHeld                             *prometheus.CounterVec // by namespace
	writeWait, commit                      prometheus.Histogram
	groupSize                              prometheus.Histogram
	queueWait, run                         *prometheus.HistogramVec // by namespace and lane

	workers, expired, executions, oldestReady, agents, leader *prometheus.Desc
	laneLimit, lanePaused                                     *prometheus.Desc
	finished                                                  *prometheus.Desc

	// fleetOnly: only the fleet's metrics read from the database and the
	// failed reads are exported (NewFleet), not this process's own counts.
	fleetOnly bool

	mu         sync.Mutex
	namespaces map[string]bool    // every namespace reported so far
	lanes      map[[2]string]bool // every (namespace, lane) reported so far
	// The lanes' finished executions read from the database: each minute
	// of the last hour as last read, and the totals counted since the
	// first scrape (a minute's growth is added as it is seen).
	finishedMinutes map[laneMinute][2]int
	finishedTotals  map[[2]string][2]float64 // completed, failed
	// finishedFloor is the latest window start read (Unix ms of its
	// minute): minutes before it are done with, so that a scrape whose
	// clock reads earlier (stepped back, or a slow scrape overtaken by
	// another) never counts one of them again.
	finishedFloor int64
}

// laneMinute is one lane's minute.
type laneMinute struct {
	namespace, lane string
	minute          int64 // Unix ms of its start
}

// finishedWindow is how far back each scrape reads the lanes' finished
// executions: a minute that ends within it is counted when it grows.
const finishedWindow = time.Hour

var (
	_ prometheus.Collector    = (*Collector)(nil)
	_ service.FleetObserver   = (*Collector)(nil)
	_ service.LabeledObserver = (*Collector)(nil)
	_ service.FlowObserver    = (*Collector)(nil)
	_ service.TimingObserver  = (*Collector)(nil)
)

// waitBuckets are the buckets of the wait and run histograms: 1 ms to about
// 4.6 hours, a factor of 4 apart (work waits and runs for milliseconds to
// hours).
var waitBuckets = prometheus.ExponentialBuckets(0.001, 4, 12)

// New returns a Collector. Pass it to service.Open with service.WithObserver,
// then call Watch with the Store, whose Stats the gauges report.
func New() *Collector {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "roster", Name: name, Help: help})
	}
	latency := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "roster", Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16), // 50 µs to ~1.6 s
		})
	}
	byLane := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "roster", Name: name, Help: help}, []string{"namespace", "lane"})
	}
	return &Collector{
		timeout:     5 * time.Second,
		claims:      byLane("claims_total", "Executions claimed by this process."),
		completions: byLane("completions_total", "Attempts completed by this process."),
		failures:    byLane("failures_total", "Attempts failed by this process."),
		leasesLost:  counter("leases_lost_total", "Renewals, completions and failures that found their lease lost."),
		reclaims:    counter("reclaims_total", "Expired leases reclaimed."),
		swept:       counter("workers_swept_total", "Lapsed workers swept."),
		overloads:   counter("overloads_total", "Writes refused with ErrOverloaded."),
		leaderChanges: counter("leader_changes_total",
			"Times this process's RunSweeper took the maintenance leadership under a new epoch, or lost it."),
		scheduleRuns: counter("schedule_runs_total", "Executions created by schedules (by this process's maintenance)."),
		scrapeErrors: counter("stats_errors_total", "Scrapes whose Stats read failed."),
		claimsHeld: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "roster", Name: "claims_held_total",
			Help: "Lanes whose ready work a cap, a rate or a pause held back from a claim of this process, counted per claim."},
			[]string{"namespace"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "roster", Name: "queue_wait_seconds",
			Help: "How long executions claimed by this process had been claimable (from RunAt to the claim).", Buckets: waitBuckets},
			[]string{"namespace", "lane"}),
		run: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "roster", Name: "run_seconds",
			Help: "How long this process's RunWorker handlers ran (from the lease handed to the handler to its return).", Buckets: waitBuckets},
			[]string{"namespace", "lane"}),
		writeWait: latency("write_queue_wait_seconds", "How long a write waited for the writer (SQLite) or a pooled connection (PostgreSQL)."),
		commit:    latency("commit_seconds", "How long a commit took."),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "roster", Name: "commit_writes", Help: "Writes sharing one commit (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 8),
		}),
		workers: prometheus.NewDesc("roster_workers", "Registered workers, alive or lapsed (not yet swept).",
			[]string{"namespace", "state"}, nil),
		expired: prometheus.NewDesc("roster_expired_leases", "Running leases past their expiry.",
			[]string{"namespace"}, nil),
		executions: prometheus.NewDesc("roster_executions", "Live executions: ready (claimable), scheduled (RunAt ahead) or running.",
			[]string{"namespace", "lane", "state"}, nil),
		oldestReady: prometheus.NewDesc("roster_oldest_ready_age_seconds", "Age of the oldest ready execution's RunAt.",
			[]string{"namespace", "lane"}, nil),
		agents: prometheus.NewDesc("roster_agents", "Agents per state.", []string{"state"}, nil),
		laneLimit: prometheus.NewDesc("roster_lane_limit", "A live lane's flow-control limit (absent: none): max_running, max_running_per_group, or rate (claims per rate_period_seconds).",
			[]string{"namespace", "lane", "limit"}, nil),
		lanePaused: prometheus.NewDesc("roster_lane_paused", "1 when a live lane with limits is paused, else 0.",
			[]string{"namespace", "lane"}, nil),
		leader: prometheus.NewDesc("roster_leader_lease_seconds",
			"Seconds left on the maintenance leader's lease, labelled with the leader's instance (absent: no leader).",
			[]string{"instance"}, nil),
		finished: prometheus.NewDesc("roster_lane_finished_total",
			"Executions of the lane that ended completed, or failed for good (no attempt left), read from the database (the whole fleet's), counted since this Collector's first scrape (which counts the last hour's).",
			[]string{"namespace", "lane", "outcome"}, nil),
		namespaces:      map[string]bool{},
		lanes:           map[[2]string]bool{},
		finishedMinutes: map[laneMinute][2]int{},
		finishedTotals:  map[[2]string][2]float64{},
	}
}

// NewFleet returns a Collector of the fleet's metrics read from the database
// only (the gauges from Store.Stats and roster_lane_finished_total from
// Store.Throughput at each scrape, once Watch is called) and of
// roster_stats_errors_total: what a process that does no work of its own,
// such as 'roster serve', can know. None of its counters or histograms of
// this process's claims, ends and writes would ever move there.
func NewFleet() *Collector {
	c := New()
	c.fleetOnly = true
	return c
}

// Watch sets the Store whose Stats the fleet gauges report; without it the
// Collector exports only this process's counters and histograms.
func (c *Collector) Watch(s *service.Store) { c.store.Store(s) }

func (c *Collector) metrics() []prometheus.Collector {
	if c.fleetOnly {
		return []prometheus.Collector{c.scrapeErrors}
	}
	return []prometheus.Collector{c.claims, c.completions, c.failures, c.leasesLost, c.reclaims, c.swept,
		c.overloads, c.leaderChanges, c.scheduleRuns, c.scrapeErrors, c.claimsHeld, c.writeWait, c.commit, c.groupSize,
		c.queueWait, c.run}
}

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics() {
		m.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{c.workers, c.expired, c.executions, c.oldestReady, c.agents, c.leader, c.laneLimit, c.lanePaused, c.finished} {
		ch <- d
	}
}

// Collect sends the counters and histograms, gauges read from one Stats
// snapshot of the watched Store, and the lanes' finished executions read
// from its last hour (Store.Throughput, which reads the index of finished
// executions from the hour's start only).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics() {
		m.Collect(ch)
	}
	s := c.store.Load()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := s.Stats(ctx, time.Time{})
	if err != nil {
		c.scrapeErrors.Inc()
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seenNS, seenLanes := map[string]bool{}, map[[2]string]bool{}
	for _, ns := range st.Namespaces {
		seenNS[ns.Namespace], c.namespaces[ns.Namespace] = true, true
		gauge(c.workers, float64(ns.WorkersAlive), ns.Namespace, "alive")
		gauge(c.workers, float64(ns.WorkersLapsed), ns.Namespace, "lapsed")
		gauge(c.expired, float64(ns.ExpiredLeases), ns.Namespace)
		for _, l := range ns.Lanes {
			k := [2]string{ns.Namespace, l.Lane}
			seenLanes[k], c.lanes[k] = true, true
			gauge(c.executions, float64(l.Ready), ns.Namespace, l.Lane, "ready")
			gauge(c.executions, float64(l.Scheduled), ns.Namespace, l.Lane, "scheduled")
			gauge(c.executions, float64(l.Running), ns.Namespace, l.Lane, "running")
			age := 0.0
			if !l.OldestReadyRunAt.IsZero() {
				age = max(st.At.Sub(l.OldestReadyRunAt).Seconds(), 0)
			}
			gauge(c.oldestReady, age, ns.Namespace, l.Lane)
			if lim := l.Limits; lim != nil {
				for _, v := range []struct {
					name string
					n    float64
				}{{"max_running", float64(lim.MaxRunning)}, {"max_running_per_group", float64(lim.MaxRunningPerGroup)},
					{"rate", float64(lim.Rate)}, {"rate_period_seconds", lim.RatePeriod.Seconds()}} {
					if v.n > 0 {
						gauge(c.laneLimit, v.n, ns.Namespace, l.Lane, v.name)
					}
				}
				paused := 0.0
				if lim.Paused {
					paused = 1
				}
				gauge(c.lanePaused, paused, ns.Namespace, l.Lane)
			}
		}
	}
	// What was reported once and is empty now reads 0.
	for ns := range c.namespaces {
		if !seenNS[ns] {
			gauge(c.workers, 0, ns, "alive")
			gauge(c.workers, 0, ns, "lapsed")
			gauge(c.expired, 0, ns)
		}
	}
	for k := range c.lanes {
		if !seenLanes[k] {
			for _, state := range []string{"ready", "scheduled", "running"} {
				gauge(c.executions, 0, k[0], k[1], state)
			}
			gauge(c.oldestReady, 0, k[0], k[1])
		}
	}
	for state, n := range st.Agents {
		gauge(c.agents, float64(n), string(state))
	}
	if st.Leader != "" {
		gauge(c.leader, max(st.LeaderUntil.Sub(st.At).Seconds(), 0), st.Leader)
	}
	c.collectFinished(ctx, s, st.At, ch)
}

// collectFinished reads the lanes' finished executions of the last hour by
// minute and adds what each minute gained since the last scrape to the
// lanes' totals, then sends them. A minute is forgotten once it leaves the
// latest window read, and never counted again; one that shrank (pruned)
// adds nothing. Called with c.mu held.
func (c *Collector) collectFinished(ctx context.Context, s *service.Store, at time.Time, ch chan<- prometheus.Metric) {
	since := at.Add(-finishedWindow)
	minutes, err := s.Throughput(ctx, since)
	if err != nil {
		c.scrapeErrors.Inc()
		return
	}
	c.finishedFloor = max(c.finishedFloor, since.Truncate(time.Minute).UnixMilli())
	seen := make(map[laneMinute][2]int, len(minutes))
	for k, v := range c.finishedMinutes { // a window that reads earlier keeps the later minutes
		if k.minute >= c.finishedFloor {
			seen[k] = v
		}
	}
	for _, m := range minutes {
		k := laneMinute{m.Namespace, m.Lane, m.Minute.UnixMilli()}
		if k.minute < c.finishedFloor {
			continue
		}
		was, now := c.finishedMinutes[k], [2]int{m.Completed, m.Failed}
		lane := [2]string{m.Namespace, m.Lane}
		totals := c.finishedTotals[lane]
		for i := range now {
			totals[i] += float64(max(now[i]-was[i], 0))
			now[i] = max(now[i], was[i])
		}
		c.finishedTotals[lane], seen[k] = totals, now
	}
	c.finishedMinutes = seen
	for lane, totals := range c.finishedTotals {
		ch <- prometheus.MustNewConstMetric(c.finished, prometheus.CounterValue, totals[0], lane[0], lane[1], "completed")
		ch <- prometheus.MustNewConstMetric(c.finished, prometheus.CounterValue, totals[1], lane[0], lane[1], "failed")
	}
}

// Claimed counts claimed executions of no known lane (the Store calls
// ClaimedIn instead).
func (c *Collector) Claimed(n int) { c.ClaimedIn("", "", n) }

// Completed counts a completed attempt of no known lane (the Store calls
// CompletedIn instead).
func (c *Collector) Completed() { c.CompletedIn("", "") }

// Failed counts a failed attempt of no known lane (the Store calls FailedIn
// instead).
func (c *Collector) Failed() { c.FailedIn("", "") }

// ClaimHeld counts a claim that found lanes whose ready work a cap, a rate
// or a pause held back.
func (c *Collector) ClaimHeld(namespace string, lanes int) {
	c.claimsHeld.WithLabelValues(namespace).Add(float64(lanes))
}

// ClaimedIn counts executions claimed in a namespace's lane.
func (c *Collector) ClaimedIn(namespace, lane string, n int) {
	c.claims.WithLabelValues(namespace, lane).Add(float64(n))
}

// CompletedIn counts an attempt completed in a namespace's lane.
func (c *Collector) CompletedIn(namespace, lane string) {
	c.completions.WithLabelValues(namespace, lane).Inc()
}

// FailedIn counts an attempt failed in a namespace's lane.
func (c *Collector) FailedIn(namespace, lane string) {
	c.failures.WithLabelValues(namespace, lane).Inc()
}

// Waited observes how long a claimed execution had been claimable.
func (c *Collector) Waited(namespace, lane string, d time.Duration) {
	c.queueWait.WithLabelValues(namespace, lane).Observe(d.Seconds())
}

// Ran observes how long a RunWorker handler ran.
func (c *Collector) Ran(namespace, lane string, d time.Duration) {
	c.run.WithLabelValues(namespace, lane).Observe(d.Seconds())
}

// LeaseLost counts a lost lease.
func (c *Collector) LeaseLost() { c.leasesLost.Inc() }

// Reclaimed counts reclaimed leases.
func (c *Collector) Reclaimed(n int) { c.reclaims.Add(float64(n)) }

// Swept counts swept workers.
func (c *Collector) Swept(n int) { c.swept.Add(float64(n)) }

// Overloaded counts a write refused with ErrOverloaded.
func (c *Collector) Overloaded() { c.overloads.Inc() }

// WriteWaited observes a write's wait before it began.
func (c *Collector) WriteWaited(d time.Duration) { c.writeWait.Observe(d.Seconds()) }

// Committed observes a commit's duration and how many writes shared it.
func (c *Collector) Committed(d time.Duration, writes int) {
	c.commit.Observe(d.Seconds())
	c.groupSize.Observe(float64(writes))
}

// LeaderChanged counts a change of this process's maintenance leadership.
func (c *Collector) LeaderChanged() { c.leaderChanges.Inc() }

// ScheduleRuns counts executions created by schedules.
func (c *Collector) ScheduleRuns(n int) { c.scheduleRuns.Add(float64(n)) }
