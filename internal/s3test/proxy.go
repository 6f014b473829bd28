package s3test

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a server, for the failures a client meets on
// a real network: Stall stops every byte both ways, connections kept open (a server stopped
// with SIGSTOP); Kill closes every connection and refuses new ones for a while (a server
// killed and restarted). Clients pointed at URL speak to the server through it.
type Proxy struct {
	// URL is the proxy's endpoint, "http://127.0.0.1:PORT".
	URL string

	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	downTil time.Time
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	// killAt, when positive, kills the proxy (for killDown) once the servers' responses have
	// sent that many bytes more (KillAfter).
	killAt   int64
	killDown time.Duration
}

// NewProxy starts a proxy to the server at url ("http://host:port"); Close stops it.
func NewProxy(url string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), ln: ln, target: url[len("http://"):], conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || time.Now().Before(p.downTil) {
			p.mu.Unlock()
			_ = c.Close() // refused while down
			continue
		}
		p.mu.Unlock()
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, false)
		go p.pipe(c, s, true)
	}
}

// pipe copies from src to dst, a piece at a time, holding each piece while the proxy is
// stalled; it closes both ends when either fails.
func (p *Proxy) pipe(dst, src net.Conn, response bool) {
	defer p.wg.Done()
	defer p.drop(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.stalled && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if response && p.countResponse(n) {
				return // killed midway: the client gets a broken response
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			return
		}
	}
}

func (p *Proxy) drop(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// countResponse counts n bytes of a response about to be forwarded and, once they reach
// KillAfter's count, kills the proxy and reports true.
func (p *Proxy) countResponse(n int) bool {
	p.mu.Lock()
	if p.killAt <= 0 {
		p.mu.Unlock()
		return false
	}
	p.killAt -= int64(n)
	if p.killAt > 0 {
		p.mu.Unlock()
		return false
	}
	p.killAt = 0
	down := p.killDown
	p.mu.Unlock()
	p.Kill(down)
	return true
}

// KillAfter kills the proxy, as Kill(down) does, once responses have sent n more bytes
// through it: a server that dies in the middle of a response body.
func (p *Proxy) KillAfter(n int64, down time.Duration) {
	p.mu.Lock()
	p.killAt, p.killDown = n, down
	p.mu.Unlock()
}

// Stall stops forwarding bytes until Resume; connections stay open.
func (p *Proxy) Stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// Resume forwards bytes again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.stalled = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Kill closes every connection and refuses new ones for down.
func (p *Proxy) Kill(down time.Duration) {
	p.mu.Lock()
	p.downTil = time.Now().Add(down)
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}
