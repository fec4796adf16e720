package send

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
	"golang.org/x/sync/errgroup"
)

// Streams added and retired while the job runs (-j auto): during phase 1
// (the file data), Grow opens more streams with AddConn and sets them to
// work on the shared queue; Retire stops handing the newest of them
// batches, lets it finish those in flight, and closes it. The streams the
// job started with are never retired, so that hard links and the final
// phase keep the streams they expect.

// ErrGrowClosed says the pool takes no more streams: phase 1 is over, or
// the pool has no AddConn. (Before Run starts, Grow adds none, without
// an error.)
var ErrGrowClosed = errors.New("the pool takes no more streams")

// growable is phase 1's state that Grow needs, under Pool.mu.
type growable struct {
	g      *errgroup.Group
	ctx    context.Context
	queue  <-chan *model.Batch
	cancel context.CancelCauseFunc
	open   bool                  // phase 1 runs: streams may be added
	over   bool                  // phase 1 is over
	stop   map[int]chan struct{} // added streams, still retirable: close to retire
}

// Size is the number of streams at work: started, added, and neither
// retired nor given up.
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// openGrowth makes phase 1 take streams from Grow (called by Run once its
// streams run).
func (p *Pool) openGrowth(g *errgroup.Group, ctx context.Context, queue <-chan *model.Batch, cancel context.CancelCauseFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.grow = growable{g: g, ctx: ctx, queue: queue, cancel: cancel, open: true, stop: map[int]chan struct{}{}}
	p.markRunning()
}

// closeGrowth ends Grow's window (the dispatcher is done: no batch is left
// to hand out).
func (p *Pool) closeGrowth() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.grow.open, p.grow.over = false, true
	p.markRunning()
}

// Running returns a channel closed once Run's streams run, so that Grow
// adds streams, or once it never will (phase 1 is over). A step that
// -j auto takes at once waits for it: called before, Grow adds none.
func (p *Pool) Running() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		p.running = make(chan struct{})
	}
	return p.running
}

// markRunning closes the channel of Running, once; p.mu is held.
func (p *Pool) markRunning() {
	if p.running == nil {
		p.running = make(chan struct{})
	}
	select {
	case <-p.running:
	default:
		close(p.running)
	}
}

// Grow opens up to n more streams with AddConn, at once, and sets them to
// work; it returns how many it added (fewer if MaxConns bounds them or
// some could not be opened: the first error then). It serialises with
// other calls of Grow and Retire.
func (p *Pool) Grow(ctx context.Context, n int) (int, error) { return p.growBy(ctx, n, true) }

// growBy is Grow; the streams it adds may be retired if retirable.
func (p *Pool) growBy(ctx context.Context, n int, retirable bool) (int, error) {
	p.resize.Lock()
	defer p.resize.Unlock()
	p.mu.Lock()
	if !p.grow.open || p.AddConn == nil {
		over := p.grow.over || p.AddConn == nil
		p.mu.Unlock()
		if !over {
			return 0, nil // Run has not started the streams yet
		}
		return 0, ErrGrowClosed
	}
	base, jobCtx := len(p.Conns), p.jobCtx
	n = min(n, p.MaxConns-base) // Run made MaxConns at least the streams it has room for
	p.mu.Unlock()
	if n <= 0 {
		return 0, nil
	}
	conns := make([]Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() { conns[k], errs[k] = p.AddConn(jobCtx, base+k) }) // it lives as long as the job
	}
	wg.Wait()
	var up []Conn
	for _, c := range conns {
		if c != nil {
			up = append(up, c)
		}
	}
	err := errors.Join(errs...)
	p.mu.Lock()
	if !p.grow.open {
		p.mu.Unlock()
		p.closeStreams(ctx, up) // too late: the data is all sent
		return 0, ErrGrowClosed
	}
	for _, c := range up {
		i := len(p.Conns)
		p.Conns = append(p.Conns, c)
		p.stats = append(p.stats, StreamStats{})
		p.epoch = append(p.epoch, 0)
		p.down = append(p.down, false)
		p.live++
		p.attach(i, c) // Counters has room for MaxConns: see Run
		if rc, ok := c.(Receiving); ok {
			if id := rc.ReceiverProcess(); id != "" {
				p.Counters[i].RecvProcess.Store(&id)
			}
		}
		stop := make(chan struct{})
		if retirable {
			p.grow.stop[i] = stop
		}
		gr := p.grow
		gr.g.Go(func() error { return p.added(gr, i, stop) })
	}
	p.mu.Unlock()
	p.signal()
	return len(up), err
}

// added runs stream i, added by Grow, until the queue closes or it is
// retired (stop closed): then it finishes its batches in flight and is
// closed.
func (p *Pool) added(gr growable, i int, stop chan struct{}) error {
	ctr := p.Counters[i]
	ctr.Active.Store(true)
	defer ctr.Active.Store(false)
	quit := make(chan struct{})
	in, fed := p.feed(gr.ctx, gr.queue, stop, quit)
	err := p.stream(gr.ctx, i, in, gr.cancel)
	close(quit)
	<-fed
	p.mu.Lock()
	p.stats[i].Done = time.Since(p.started)
	delete(p.grow.stop, i)
	retired := false
	select {
	case <-stop: // Retire closed it
		retired = err == nil && !p.down[i]
	default:
	}
	var c Conn
	if retired {
		c = p.Conns[i]
		p.Conns[i] = retiredConn{}
		p.down[i] = true
		p.live--
	}
	p.mu.Unlock()
	if retired {
		p.signal()
		if _, cerr := c.Close(gr.ctx); cerr != nil && gr.ctx.Err() == nil {
			p.warn(fmt.Sprintf("stream %d retired: closing it: %v", i, cerr))
		}
	}
	return err
}

// Retire stops the newest added stream: it takes no more batches,
// finishes those it has, and is closed. It returns the stream's index, or
// -1 if no added stream is left to retire.
func (p *Pool) Retire() int {
	p.resize.Lock()
	defer p.resize.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.grow.open || p.live <= 1 {
		return -1
	}
	last := -1
	for i := range p.grow.stop {
		if !p.down[i] && i > last {
			last = i
		}
	}
	if last < 0 {
		return -1
	}
	close(p.grow.stop[last])
	delete(p.grow.stop, last)
	return last
}

// feed hands an added stream batches from the queue, until the queue
// closes, the stream is retired (stop) or it ends (quit); a batch taken
// but not handed over then goes back to the queue. fed closes when it is
// done.
func (p *Pool) feed(ctx context.Context, queue <-chan *model.Batch, stop, quit <-chan struct{}) (<-chan *model.Batch, <-chan struct{}) {
	out := make(chan *model.Batch)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer close(out)
		for {
			select {
			case <-stop:
				return
			case <-quit:
				return
			case <-ctx.Done():
				return
			case b, ok := <-queue:
				if !ok {
					return
				}
				select {
				case out <- b:
				case <-stop:
					p.handBack(b)
					return
				case <-quit:
					p.handBack(b)
					return
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, fed
}

// handBack returns a batch handed out but never sent to the queue.
func (p *Pool) handBack(b *model.Batch) {
	p.requeue <- b // room for every batch in flight: see Run
	p.mu.Lock()
	p.pending--
	p.mu.Unlock()
	p.signal()
}

// retiredConn stands in for a retired stream's connection, closed already.
type retiredConn struct{}

func (retiredConn) Run(context.Context, <-chan *model.Batch, func(Result)) ([]*model.Batch, error) {
	return nil, errors.New("stream retired")
}

func (retiredConn) Final(context.Context, []*model.Batch, func(Result)) error {
	return errors.New("stream retired")
}

func (retiredConn) Close(context.Context) (wire.Totals, error) { return wire.Totals{}, nil }
