package engine

import "sync"

// Hub fans change signals out to subscriptions, each filtered by namespace.
// An engine signals it from whatever tells it about changes (a LISTEN
// connection, a change check); the first subscription and the last one's
// Close call the engine back, so that it watches only while someone
// listens.
type Hub struct {
	// OnFirst runs (under no lock of the Hub's) when the first subscription
	// opens; OnLast when the last one closes. Either may be nil.
	OnFirst, OnLast func()

	mu   sync.Mutex
	subs map[*hubSub]struct{}
	// watching serializes OnFirst and OnLast.
	watching sync.Mutex
}

type hubSub struct {
	h         *Hub
	namespace string
	ch        chan struct{}
	once      sync.Once
}

// Subscribe opens a subscription to the changes of namespace ("" = every
// namespace).
func (h *Hub) Subscribe(namespace string) Subscription {
	s := &hubSub{h: h, namespace: namespace, ch: make(chan struct{}, 1)}
	h.watching.Lock()
	defer h.watching.Unlock()
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*hubSub]struct{}{}
	}
	h.subs[s] = struct{}{}
	first := len(h.subs) == 1
	h.mu.Unlock()
	if first && h.OnFirst != nil {
		h.OnFirst()
	}
	return s
}

// Signal wakes the subscriptions of namespace and those of every namespace;
// namespace "" wakes them all.
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

func (s *hubSub) Close() {
	s.once.Do(func() {
		h := s.h
		h.watching.Lock()
		defer h.watching.Unlock()
		h.mu.Lock()
		delete(h.subs, s)
		last := len(h.subs) == 0
		h.mu.Unlock()
		if last && h.OnLast != nil {
			h.OnLast()
		}
	})
}
