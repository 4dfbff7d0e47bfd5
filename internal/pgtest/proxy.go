package pgtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP to a PostgreSQL server until frozen: then it forwards
// nothing more, in either direction, accepts new connections without
// answering them, and keeps every connection open (a network partition: the
// server unreachable, connections half-open, as a client sees it).
type Proxy struct {
	ln     net.Listener
	frozen chan struct{}
	once   sync.Once
	mu     sync.Mutex
	conns  []net.Conn
}

// NewProxy starts a Proxy in front of the server of loc (a PostgreSQL URL)
// and returns loc going through it. It is healed when t ends.
func NewProxy(t testing.TB, loc string) (string, *Proxy) {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	upstream := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, frozen: make(chan struct{})}
	t.Cleanup(p.Heal)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.track(c)
			go func() {
				select {
				case <-p.frozen:
					return // hold the connection, never answer
				default:
				}
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					_ = c.Close()
					return
				}
				p.track(u)
				go p.pipe(c, u)
				go p.pipe(u, c)
			}()
		}
	}()
	u.Host = ln.Addr().String()
	return u.String(), p
}

// Freeze starts the partition.
func (p *Proxy) Freeze() { p.once.Do(func() { close(p.frozen) }) }

// Heal ends the partition by closing every connection (the test's end).
func (p *Proxy) Heal() {
	p.Freeze()
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-p.frozen:
			return // drop it, keep both ends open
		default:
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}
