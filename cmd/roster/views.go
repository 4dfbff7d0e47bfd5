package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/rosterdb/roster/service"
)

// The JSON the CLI prints: snake_case keys, times in RFC 3339 (UTC,
// milliseconds), durations in milliseconds, payloads and results in base64.

type workerJSON struct {
	Namespace     string    `json:"namespace"`
	InstanceID    string    `json:"instance_id"`
	WorkerID      string    `json:"worker_id"`
	Lanes         []string  `json:"lanes"`
	Capabilities  []string  `json:"capabilities"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	TTLMs         int64     `json:"ttl_ms"`
	RegisteredAt  time.Time `json:"registered_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	Alive         bool      `json:"alive"`
}

func workerView(w service.Worker, now time.Time) workerJSON {
	return workerJSON{
		Namespace: w.Namespace, InstanceID: w.InstanceID, WorkerID: w.WorkerID,
		Lanes: orEmpty(w.Lanes), Capabilities: orEmpty(w.Capabilities),
		LastHeartbeat: w.LastHeartbeat, TTLMs: w.TTL.Milliseconds(), RegisteredAt: w.RegisteredAt,
		ExpiresAt: w.ExpiresAt(), Alive: now.Before(w.ExpiresAt()),
	}
}

type eventJSON struct {
	Seq        int64     `json:"seq"`
	Namespace  string    `json:"namespace"`
	InstanceID string    `json:"instance_id"`
	Kind       string    `json:"kind"`
	At         time.Time `json:"at"`
	Reason     string    `json:"reason"`
}

func eventView(e service.WorkerEvent) eventJSON {
	return eventJSON{Seq: e.Seq, Namespace: e.Namespace, InstanceID: e.InstanceID, Kind: string(e.Kind), At: e.At, Reason: e.Reason}
}

type executionJSON struct {
	ID                   string    `json:"id"`
	Namespace            string    `json:"namespace"`
	Lane                 string    `json:"lane"`
	State                string    `json:"state"`
	Priority             int       `json:"priority"`
	Payload              []byte    `json:"payload"`
	Result               []byte    `json:"result"`
	RequiredCapabilities []string  `json:"required_capabilities"`
	Attempts             int       `json:"attempts"`
	MaxAttempts          int       `json:"max_attempts"`
	ReclaimCount         int       `json:"reclaim_count"`
	LastError            string    `json:"last_error"`
	CreatedAt            time.Time `json:"created_at"`
	RunAt                time.Time `json:"run_at"`
	RetryBackoffMs       int64     `json:"retry_backoff_ms"`
	// PayloadText and ResultText repeat Payload and Result (base64) as
	// text when they are valid UTF-8 (absent otherwise).
	PayloadText    *string    `json:"payload_text,omitempty"`
	ResultText     *string    `json:"result_text,omitempty"`
	UniqueKey      string     `json:"unique_key"`
	Group          string     `json:"group"`
	Holder         string     `json:"holder"`
	ClaimedAt      *time.Time `json:"claimed_at"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	// Metadata is the execution's ({} when none).
	Metadata map[string]string `json:"metadata"`
}

func executionView(e service.Execution) executionJSON {
	return executionJSON{
		ID: e.ID.String(), Namespace: e.Namespace, Lane: e.Lane, State: string(e.State), Priority: e.Priority,
		Payload: e.Payload, Result: e.Result, RequiredCapabilities: orEmpty(e.RequiredCapabilities),
		Attempts: e.Attempts, MaxAttempts: e.MaxAttempts, ReclaimCount: e.ReclaimCount, LastError: e.LastError,
		CreatedAt: e.CreatedAt, RunAt: e.RunAt, RetryBackoffMs: e.RetryBackoff.Milliseconds(),
		PayloadText: text(e.Payload), ResultText: text(e.Result), UniqueKey: e.UniqueKey, Group: e.Group, Holder: e.Holder,
		ClaimedAt: optional(e.ClaimedAt), LeaseExpiresAt: optional(e.LeaseExpiresAt), FinishedAt: optional(e.FinishedAt),
		Metadata: orEmptyMap(e.Metadata),
	}
}

// optional is a time for JSON: null when zero.
func optional(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

type expiredLeaseJSON struct {
	ExecutionID  string    `json:"execution_id"`
	LeaseID      string    `json:"lease_id"`
	AttemptIndex int       `json:"attempt_index"`
	Epoch        int64     `json:"epoch"`
	Namespace    string    `json:"namespace"`
	InstanceID   string    `json:"instance_id"`
	ExpiresAt    time.Time `json:"expires_at"`
}

func expiredLeaseView(l service.ExpiredLease) expiredLeaseJSON {
	return expiredLeaseJSON{ExecutionID: l.ExecutionID.String(), LeaseID: l.LeaseID.String(), AttemptIndex: l.AttemptIndex,
		Epoch: l.Epoch, Namespace: l.Namespace, InstanceID: l.InstanceID, ExpiresAt: l.ExpiresAt}
}

type agentJSON struct {
	ID                     string    `json:"id"`
	State                  string    `json:"state"`
	TerminalReason         string    `json:"terminal_reason"`
	Provider               string    `json:"provider"`
	ProviderSessionID      string    `json:"provider_session_id"`
	CheckpointSessionID    string    `json:"checkpoint_session_id"`
	CheckpointCursor       int64     `json:"checkpoint_cursor"`
	OwnerActor             string    `json:"owner_actor"`
	OwnerPeerClass         string    `json:"owner_peer_class"`
	OwnerWriteNamespace    string    `json:"owner_write_namespace"`
	OwnerVisibleNamespaces []string  `json:"owner_visible_namespaces"`
	SpawnFingerprint       string    `json:"spawn_fingerprint"`
	SpawnedAt              time.Time `json:"spawned_at"`
	StateChangedAt         time.Time `json:"state_changed_at"`
	IdempotencyKey         string    `json:"idempotency_key"`
	Host                   string    `json:"host"`
	HolderNamespace        string    `json:"holder_namespace"`
	HolderInstanceID       string    `json:"holder_instance_id"`
}

func agentView(a service.Agent) agentJSON {
	return agentJSON{
		ID: a.ID, State: string(a.State), TerminalReason: string(a.TerminalReason), Provider: a.Provider,
		ProviderSessionID: a.ProviderSessionID, CheckpointSessionID: a.CheckpointSessionID, CheckpointCursor: a.CheckpointCursor,
		OwnerActor: a.OwnerActor, OwnerPeerClass: a.OwnerPeerClass, OwnerWriteNamespace: a.OwnerWriteNamespace,
		OwnerVisibleNamespaces: orEmpty(a.OwnerVisibleNamespaces), SpawnFingerprint: a.SpawnFingerprint,
		SpawnedAt: a.SpawnedAt, StateChangedAt: a.StateChangedAt, IdempotencyKey: a.IdempotencyKey, Host: a.Host,
		HolderNamespace: a.HolderNamespace, HolderInstanceID: a.HolderInstanceID,
	}
}

type statsJSON struct {
	At         time.Time       `json:"at"`
	Namespaces []namespaceJSON `json:"namespaces"`
	Agents     map[string]int  `json:"agents"`
	// Leader leads the fleet's maintenance until LeaderUntil ("" and null:
	// none).
	Leader      string     `json:"leader"`
	LeaderUntil *time.Time `json:"leader_until"`
}

type namespaceJSON struct {
	Namespace     string     `json:"namespace"`
	WorkersAlive  int        `json:"workers_alive"`
	WorkersLapsed int        `json:"workers_lapsed"`
	ExpiredLeases int        `json:"expired_leases"`
	Lanes         []laneJSON `json:"lanes"`
}

type laneJSON struct {
	Lane             string     `json:"lane"`
	Ready            int        `json:"ready"`
	Scheduled        int        `json:"scheduled"`
	Running          int        `json:"running"`
	OldestReadyRunAt *time.Time `json:"oldest_ready_run_at"`
	OldestReadyAgeMs int64      `json:"oldest_ready_age_ms"`
	// Limits: the lane's flow-control limits, null when it has none.
	Limits *laneLimitsJSON `json:"limits"`
	// WorkersAlive: the namespace's alive workers that claim from the lane;
	// Unserved: it has ready work and none.
	WorkersAlive int  `json:"workers_alive"`
	Unserved     bool `json:"unserved"`
}

func statsView(st service.Stats) statsJSON {
	out := statsJSON{At: st.At, Namespaces: []namespaceJSON{}, Agents: map[string]int{}, Leader: st.Leader, LeaderUntil: optional(st.LeaderUntil)}
	for state, n := range st.Agents {
		out.Agents[string(state)] = n
	}
	for _, ns := range st.Namespaces {
		v := namespaceJSON{Namespace: ns.Namespace, WorkersAlive: ns.WorkersAlive, WorkersLapsed: ns.WorkersLapsed,
			ExpiredLeases: ns.ExpiredLeases, Lanes: []laneJSON{}}
		for _, l := range ns.Lanes {
			lv := laneJSON{Lane: l.Lane, Ready: l.Ready, Scheduled: l.Scheduled, Running: l.Running,
				WorkersAlive: l.WorkersAlive, Unserved: l.Unserved()}
			if !l.OldestReadyRunAt.IsZero() {
				t := l.OldestReadyRunAt
				lv.OldestReadyRunAt = &t
				lv.OldestReadyAgeMs = max(st.At.Sub(t).Milliseconds(), 0)
			}
			if l.Limits != nil {
				lim := laneLimitsView(*l.Limits)
				lv.Limits = &lim
			}
			v.Lanes = append(v.Lanes, lv)
		}
		out.Namespaces = append(out.Namespaces, v)
	}
	return out
}

// pageJSON is one page of a list.
type pageJSON[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next"`
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func orEmpty(vs []string) []string {
	if vs == nil {
		return []string{}
	}
	return vs
}

// Table cells.

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func list(vs []string) string {
	if len(vs) == 0 {
		return "-"
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		if strings.ContainsAny(v, ", \"") {
			v = strconv.Quote(v)
		}
		out[i] = v
	}
	return strings.Join(out, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// preview shows a payload as text when it is printable, else its size.
func preview(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	s := string(b)
	printable := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			printable = false
			break
		}
	}
	if !printable {
		return strconv.Itoa(len(b)) + " bytes"
	}
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return strconv.Quote(s)
}

func nextFooter(next string) string {
	if next == "" {
		return ""
	}
	return "next page: --after " + next
}
