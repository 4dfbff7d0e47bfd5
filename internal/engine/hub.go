package engine

import "sync"

// Hub fans change signals out to subscriptions, each filtered by namespace.
// An engine signals it from whatever tells it about changes (a LISTEN
// connection, a change check). A subscription receives every signal while it
// is open; arming it says someone is waiting for one now, and the first
// armed subscription and the last one disarmed call the engine back, so
// that an engine whose watching costs (SQLite's change check) watches only
// then.
type Hub struct {
	// OnArmed runs (under no lock but the Hub's arming lock) when a first
	// subscription is armed; OnDisarmed when the last armed one is disarmed
	// or closed. Either may be nil.
	OnArmed, OnDisarmed func()

	mu    sync.Mutex
	subs  map[*hubSub]struct{}
	armed int
	// arming serializes OnArmed and OnDisarmed with the count they follow.
	arming sync.Mutex
}

type hubSub struct {
	h         *Hub
	namespace string
	ch        chan struct{}
	armed     bool // guarded by h.arming
	closed    bool // guarded by h.arming
}

// Subscribe opens a subscription, unarmed, to the changes of namespace ("" =
// every namespace).
func (h *Hub) Subscribe(namespace string) Subscription {
	s := &hubSub{h: h, namespace: namespace, ch: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*hubSub]struct{}{}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Signal wakes the subscriptions of namespace and those of every namespace;
// namespace "" wakes them all. A subscription keeps one pending signal.
func (h *Hub) Signal(namespace string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if namespace == "" || s.namespace == "" || s.namespace == namespace {
			select {
			case s.ch <- struct{}{}:
			default:
			}
		}
	}
}

// Len reports how many subscriptions are open.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (s *hubSub) C() <-chan struct{} { return s.ch }

func (s *hubSub) Arm() {
	h := s.h
	h.arming.Lock()
	defer h.arming.Unlock()
	if s.armed || s.closed {
		return
	}
	s.armed = true
	h.armed++
	if h.armed == 1 && h.OnArmed != nil {
		h.OnArmed()
	}
}

func (s *hubSub) Disarm() {
	h := s.h
	h.arming.Lock()
	defer h.arming.Unlock()
	s.disarm()
}

// disarm is Disarm with h.arming held.
func (s *hubSub) disarm() {
	h := s.h
	if !s.armed {
		return
	}
	s.armed = false
	h.armed--
	if h.armed == 0 && h.OnDisarmed != nil {
		h.OnDisarmed()
	}
}

func (s *hubSub) Close() {
	h := s.h
	h.arming.Lock()
	defer h.arming.Unlock()
	if s.closed {
		return
	}
	s.disarm()
	s.closed = true
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}
