package framework

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards each TCP connection to the first of its backends that
// accepts it, as a Service forwards to the endpoints that are up: the
// webhook configurations point at it, and it reaches whichever tally
// replica is alive. It passes TLS through untouched.
type Proxy struct {
	Addr     string
	backends []string
	ln       net.Listener
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// StartProxy listens on a free port of 127.0.0.1 and forwards to backends
// (host:port), tried in order.
func StartProxy(backends ...string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), backends: backends, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	defer func() {
		c.Close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	var b net.Conn
	var err error
	for _, addr := range p.backends {
		if b, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			break
		}
	}
	if b == nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	<-done
}

// Close stops listening, closes the connections and waits for them to end.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
