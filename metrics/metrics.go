// Package metrics exports a roster Store to Prometheus
// (github.com/prometheus/client_golang): gauges read from Store.Stats at each
// scrape, and counters and histograms of what the Store did, heard through
// service.Observer. It is a package of its own so that importing service
// alone pulls no metrics dependency.
//
//	c := metrics.New()
//	store, err := service.Open(ctx, path, service.WithObserver(c))
//	c.Watch(store)
//	prometheus.MustRegister(c)
package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rosterdb/roster/service"
)

// Collector is a prometheus.Collector and a service.Observer.
type Collector struct {
	store   atomic.Pointer[service.Store]
	timeout time.Duration

	claims, completions, failures, leasesLost prometheus.Counter
	reclaims, swept, overloads                prometheus.Counter
	scrapeErrors                              prometheus.Counter
	writeWait, commit                         prometheus.Histogram
	groupSize                                 prometheus.Histogram

	workers, expired, executions, oldestReady, agents *prometheus.Desc
}

var (
	_ prometheus.Collector = (*Collector)(nil)
	_ service.Observer     = (*Collector)(nil)
)

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
	return &Collector{
		timeout:      5 * time.Second,
		claims:       counter("claims_total", "Executions claimed."),
		completions:  counter("completions_total", "Attempts completed."),
		failures:     counter("failures_total", "Attempts failed."),
		leasesLost:   counter("leases_lost_total", "Renewals, completions and failures that found their lease lost."),
		reclaims:     counter("reclaims_total", "Expired leases reclaimed."),
		swept:        counter("workers_swept_total", "Lapsed workers swept."),
		overloads:    counter("overloads_total", "Writes refused with ErrOverloaded."),
		scrapeErrors: counter("stats_errors_total", "Scrapes whose Stats read failed."),
		writeWait:    latency("write_queue_wait_seconds", "How long a write waited for the writer (SQLite) or a pooled connection (PostgreSQL)."),
		commit:       latency("commit_seconds", "How long a commit took."),
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
	}
}

// Watch sets the Store whose Stats the gauges report.
func (c *Collector) Watch(s *service.Store) { c.store.Store(s) }

func (c *Collector) metrics() []prometheus.Collector {
	return []prometheus.Collector{c.claims, c.completions, c.failures, c.leasesLost, c.reclaims, c.swept,
		c.overloads, c.scrapeErrors, c.writeWait, c.commit, c.groupSize}
}

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics() {
		m.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{c.workers, c.expired, c.executions, c.oldestReady, c.agents} {
		ch <- d
	}
}

// Collect sends the counters and histograms, and gauges read from one
// Stats snapshot of the watched Store.
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
	for _, ns := range st.Namespaces {
		gauge(c.workers, float64(ns.WorkersAlive), ns.Namespace, "alive")
		gauge(c.workers, float64(ns.WorkersLapsed), ns.Namespace, "lapsed")
		gauge(c.expired, float64(ns.ExpiredLeases), ns.Namespace)
		for _, l := range ns.Lanes {
			gauge(c.executions, float64(l.Ready), ns.Namespace, l.Lane, "ready")
			gauge(c.executions, float64(l.Scheduled), ns.Namespace, l.Lane, "scheduled")
			gauge(c.executions, float64(l.Running), ns.Namespace, l.Lane, "running")
			age := 0.0
			if !l.OldestReadyRunAt.IsZero() {
				age = max(st.At.Sub(l.OldestReadyRunAt).Seconds(), 0)
			}
			gauge(c.oldestReady, age, ns.Namespace, l.Lane)
		}
	}
	for state, n := range st.Agents {
		gauge(c.agents, float64(n), string(state))
	}
}

// Claimed counts claimed executions.
func (c *Collector) Claimed(n int) { c.claims.Add(float64(n)) }

// Completed counts a completed attempt.
func (c *Collector) Completed() { c.completions.Inc() }

// Failed counts a failed attempt.
func (c *Collector) Failed() { c.failures.Inc() }

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
