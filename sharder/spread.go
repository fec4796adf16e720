package sharder

import (
	"context"
	"time"

	"github.com/bulkmove/bulkmove/model"
)

// Spreading: on a destination where each create is a round trip to a
// server (NFS, FUSE), the creates of one directory go one after the other,
// each holding the directory's lock for its round trips, however many are
// in flight. Batches that hold one directory's files (as the walk delivers
// them) then keep the receiver to about one file per directory being
// written at a time, however many creates are in flight; taking the
// directories in turn lets them proceed together. So, asked to
// (Options.Spread), the collector holds the files it gets and hands the
// partitioner one of each directory in turn.
//
// Until told whether to spread (the receiver says whether it is slow when
// it connects, which the walk does not wait for), it holds up to
// spreadHold files without cutting a batch: nothing could be sent yet.

const (
	// spreadHold bounds the files held (about 200 bytes each): past it,
	// undecided, the oldest go on as they came; spreading, a file of each
	// directory goes on in turn.
	spreadHold = 4096
	// spreadDirs is how many directories are taken in turn at a time
	// (those that came first; one that runs out gives its place to the
	// next): enough that the receiver's files in flight (a few dozen) go
	// a few to a directory, few enough that a batch does not open many
	// more directories than it would have (each open a lookup per path
	// component on such a filesystem): a deep tree whose directories all
	// went in turn ran slower than not spread.
	spreadDirs = 16
)

// spreadWait is how long files are held while spreading (a slow walk
// sends few): then all of them go on, in turn. A variable for tests.
var spreadWait = 20 * time.Millisecond

// spreader sits between the collector and the partitioner.
type spreader struct {
	p      *partitioner
	decide <-chan bool // nil once decided
	on     bool        // decided to spread
	queues map[string]*dirQueue
	ring   []*dirQueue // directories with files held, in order of arrival
	held   int
	timer  *time.Timer
	armed  bool
}

type dirQueue struct {
	dir   string
	files []model.Entry
}

// newSpreader returns the collector's way to the partitioner: straight
// there if decide is nil.
func newSpreader(p *partitioner, decide <-chan bool) *spreader {
	return &spreader{p: p, decide: decide, queues: map[string]*dirQueue{}}
}

// decided returns the channel that brings the decision, or nil once it
// came.
func (s *spreader) decided() <-chan bool { return s.decide }

// due returns the timer's channel while held files wait on it, or nil.
func (s *spreader) due() <-chan time.Time {
	if !s.armed {
		return nil
	}
	return s.timer.C
}

// holding reports whether files go through the queues rather than
// straight to the partitioner.
func (s *spreader) holding() bool { return s.decide != nil || s.on }

// add takes the files of one chunk.
func (s *spreader) add(ctx context.Context, files []model.Entry) error {
	if !s.holding() {
		for _, e := range files {
			if err := s.p.add(ctx, e); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range files {
		d := parentDir(e.Path)
		q := s.queues[d]
		if q == nil {
			q = &dirQueue{dir: d}
			s.queues[d] = q
			s.ring = append(s.ring, q)
		}
		q.files = append(q.files, e)
		s.held++
	}
	if err := s.handOn(ctx, spreadHold); err != nil {
		return err
	}
	if s.on && s.held > 0 && !s.armed {
		s.arm()
	}
	return nil
}

// set applies the decision.
func (s *spreader) set(ctx context.Context, on bool) error {
	s.decide, s.on = nil, on
	if !on {
		return s.drain(ctx)
	}
	if s.held > 0 && !s.armed {
		s.arm()
	}
	return nil
}

// expire is the timer's: the walk is slow, the held files go on.
func (s *spreader) expire(ctx context.Context) error {
	s.armed = false
	return s.drain(ctx)
}

// finish hands on everything held, once the walk is over: waiting for the
// decision first if it has not come.
func (s *spreader) finish(ctx context.Context) error {
	if s.decide != nil && s.held > 0 {
		select {
		case on := <-s.decide:
			s.decide, s.on = nil, on
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.armed {
		s.timer.Stop()
		s.armed = false
	}
	return s.drain(ctx)
}

// drain hands on every held file.
func (s *spreader) drain(ctx context.Context) error { return s.handOn(ctx, 0) }

// handOn hands on held files until at most keep are: in turn if
// spreading, else as they came.
func (s *spreader) handOn(ctx context.Context, keep int) error {
	for s.held > keep {
		var err error
		if s.on {
			err = s.round(ctx)
		} else {
			err = s.oldest(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// round hands on one file of each of the first spreadDirs directories
// held.
func (s *spreader) round(ctx context.Context) error {
	n := min(len(s.ring), spreadDirs)
	keep := s.ring[:0]
	for _, q := range s.ring[:n] {
		e := q.files[0]
		q.files = q.files[1:]
		s.held--
		if len(q.files) > 0 {
			keep = append(keep, q)
		} else {
			delete(s.queues, q.dir)
		}
		if err := s.p.add(ctx, e); err != nil {
			return err // the walk ends
		}
	}
	if len(keep) < n {
		keep = append(keep, s.ring[n:]...) // overlapping: copy moves left
		clear(s.ring[len(keep):])
		s.ring = keep
	}
	return nil
}

// oldest hands on the files of the directory that came first.
func (s *spreader) oldest(ctx context.Context) error {
	q := s.ring[0]
	s.ring[0] = nil
	s.ring = s.ring[1:]
	delete(s.queues, q.dir)
	s.held -= len(q.files)
	for _, e := range q.files {
		if err := s.p.add(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

func (s *spreader) arm() {
	if s.timer == nil {
		s.timer = time.NewTimer(spreadWait)
	} else {
		s.timer.Reset(spreadWait)
	}
	s.armed = true
}
