package ssh

import (
	"context"
	"fmt"
	"sync"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport/sshx"
)

// growth opens the streams -j auto adds over SSH: each a connection of
// its own joining the agent hub, from connections opened ahead (prepare)
// if there are, else new ones; the streams Open leaves pending over a near
// path, channels of the first connection (share).
type growth struct {
	t        *Transport
	mu       sync.Mutex
	spare    []sshx.Link
	prepared int // connections prepare opened or is opening
	// lateDone is closed once the connections late waits for are up
	// (or failed); nil if there are none.
	lateDone chan struct{}
	dialing  sync.WaitGroup
	// shared is the connection the next sharedLeft streams join over as
	// channels of their own (see Config.Share); nil if none.
	shared     sshx.Link
	sharedLeft int
}

// growth returns the transport's growth (one per transport).
func (t *Transport) growth() *growth {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.grow == nil {
		t.grow = &growth{t: t}
	}
	return t.grow
}

// add opens stream i.
func (g *growth) add(ctx context.Context, i int) (send.Conn, error) {
	c := g.take()
	if c == nil {
		c = g.takeShared()
	}
	if c == nil {
		g.dialing.Wait() // connections on their way are sooner there than new ones
		c = g.take()
	}
	t := g.t
	t.mu.Lock()
	for len(t.clients) <= i {
		t.clients = append(t.clients, nil)
	}
	if c != nil {
		t.clients[i] = c // Redial joins the hub over it (or dials anew if it fails)
	}
	t.mu.Unlock()
	conn, err := t.Redial(ctx, i)
	if err != nil {
		return nil, fmt.Errorf("stream %d: %w", i, err)
	}
	t.cfg.Dialer.Trace("%s stream %d ready", t.cfg.Target.Host, i)
	return conn, nil
}

// take returns a connection opened ahead, or nil.
func (g *growth) take() sshx.Link {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.spare)
	if n == 0 {
		return nil
	}
	c := g.spare[n-1]
	g.spare = g.spare[:n-1]
	return c
}

// takeShared returns the shared connection if streams are left to join
// over it, else nil.
func (g *growth) takeShared() sshx.Link {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shared == nil || g.sharedLeft == 0 {
		return nil
	}
	g.sharedLeft--
	return g.shared
}

// share makes c the connection the streams Open leaves pending join over
// (shareFor says how many), and closes the connections dialed with it as
// they come up (rest, DialFirst's).
func (g *growth) share(c sshx.Link, rest func() ([]sshx.Link, []error)) {
	g.mu.Lock()
	g.shared = c
	g.mu.Unlock()
	g.dialing.Go(func() {
		cs, _ := rest()
		for _, c := range cs {
			c.Close()
		}
	})
}

// shareFor sets how many streams join over the shared connection, if
// there is one.
func (g *growth) shareFor(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shared != nil {
		g.sharedLeft = n
	}
}

// prepare opens SSH connections in the background, for add (over a long
// path a connection takes several round trips), until n in all were
// opened ahead; done closes those not taken. ctx is the job's: the
// connections live as long as it.
func (g *growth) prepare(ctx context.Context, n int) (done func()) {
	g.mu.Lock()
	n -= g.prepared
	g.prepared += max(n, 0)
	g.mu.Unlock()
	if n > 0 {
		g.dialing.Go(func() {
			cs, _, err := g.t.links.DialN(ctx, n)
			if err != nil {
				return
			}
			g.mu.Lock()
			g.spare = append(g.spare, cs...)
			g.mu.Unlock()
		})
	}
	return g.closeSpares
}

// late makes n connections on their way (wait returns them) spares for
// add, as prepare does.
func (g *growth) late(ctx context.Context, n int, wait func() []sshx.Link) {
	done := make(chan struct{})
	g.mu.Lock()
	g.prepared += n
	g.lateDone = done
	g.mu.Unlock()
	g.dialing.Go(func() {
		defer close(done)
		cs := wait()
		g.mu.Lock()
		g.spare = append(g.spare, cs...)
		g.mu.Unlock()
	})
}

// idle returns, once the connections late waits for are up, one of them
// not taken yet (nil if none is left), without taking it.
func (g *growth) idle() sshx.Link {
	g.mu.Lock()
	done := g.lateDone
	g.mu.Unlock()
	if done == nil {
		return nil
	}
	<-done
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.spare); n > 0 {
		return g.spare[n-1]
	}
	return nil
}

// closeSpares closes the connections opened ahead and not taken.
func (g *growth) closeSpares() {
	g.dialing.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.spare {
		c.Close()
	}
	g.spare = nil
}
