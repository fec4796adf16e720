package transporttest

import (
	"io"
	"sync"
)

// Link is a connection in this process between a sender and a receiving
// function, which a test can cut or stall: the streams of a setup whose
// transport takes connections opened already.
type Link struct {
	// R, W and C are the sender's end: what the receiver says, what goes
	// to it, and what closes the link.
	R io.Reader
	W io.Writer
	C io.Closer

	toR, fromR     *io.PipeReader
	toW, fromW     *io.PipeWriter
	mu             sync.Mutex
	stalled        bool
	resume, closed chan struct{}
	closeOnce      sync.Once
	done           chan struct{}
}

// NewLink starts serve on the receiving end of a new link; it runs until
// the link is closed or cut.
func NewLink(serve func(r io.Reader, w io.Writer) error) *Link {
	l := &Link{closed: make(chan struct{}), done: make(chan struct{})}
	l.toR, l.toW = io.Pipe()
	l.fromR, l.fromW = io.Pipe()
	l.R, l.W, l.C = l.fromR, writerFunc(l.write), closerFunc(l.Close)
	go func() {
		defer close(l.done)
		serve(l.toR, l.fromW)
		l.fromW.Close()
		l.toR.Close()
	}()
	return l
}

// write passes p on to the receiver, unless the link is stalled: then it
// waits until it is not, or closed.
func (l *Link) write(p []byte) (int, error) {
	for {
		l.mu.Lock()
		stalled, resume := l.stalled, l.resume
		l.mu.Unlock()
		if !stalled {
			return l.toW.Write(p)
		}
		select {
		case <-resume:
		case <-l.closed:
			return 0, io.ErrClosedPipe
		}
	}
}

// Stall stops (on) or resumes the bytes going to the receiver.
func (l *Link) Stall(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case on && !l.stalled:
		l.stalled, l.resume = true, make(chan struct{})
	case !on && l.stalled:
		l.stalled = false
		close(l.resume)
	}
}

// Cut breaks the link both ways, as a network failure would.
func (l *Link) Cut() { l.Close() }

// Close closes the link and waits for the receiving function to return.
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.toW.CloseWithError(io.ErrClosedPipe)
		l.fromR.CloseWithError(io.ErrClosedPipe)
	})
	<-l.done
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
