package source

import (
	"io"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Read-ahead: on a slow source filesystem (NFS, Lustre, GPFS: every open a
// round trip to a server), a stream's files are opened, and the small ones
// read whole and checked, by a pool of readers ahead of the tar writer,
// which takes them in order. On a fast one (Source.IO says one at a time)
// there is no pool: the writer opens each file itself.

// aheadMax is the largest file read whole ahead of the writer; larger ones
// are only opened ahead. (Files from wire.SparseMin up are read by the writer,
// which looks for their holes.)
const aheadMax = min(wire.SparseMin-1, 128<<10)

// aheadPools hold the buffers of files read ahead, by size class (4 KiB,
// 8 KiB, ... up to aheadMax): a window of small files takes little more
// memory than their bytes, where one size for all held aheadMax for each.
var aheadPools [aheadClasses]sync.Pool

const aheadClasses = 6 // 4 KiB << 0..5; the last holds aheadMax

// aheadNone is the buffer of an empty file: nothing from the pools.
var aheadNone = new([]byte)

// aheadClass is the class of a buffer for n bytes (n <= aheadMax).
func aheadClass(n int64) int {
	c := 0
	for c < aheadClasses-1 && n > 4<<10<<c {
		c++
	}
	return c
}

// aheadGet returns a buffer of at least n bytes (n <= aheadMax).
func aheadGet(n int64) *[]byte {
	if n == 0 {
		return aheadNone
	}
	c := aheadClass(n)
	if bp, ok := aheadPools[c].Get().(*[]byte); ok {
		return bp
	}
	size := 4 << 10 << c
	if c == aheadClasses-1 {
		size = max(size, aheadMax)
	}
	b := make([]byte, size)
	return &b
}

// aheadPut gives back a buffer aheadGet returned.
func aheadPut(bp *[]byte) {
	if bp == aheadNone {
		return
	}
	aheadPools[aheadClass(int64(cap(*bp)))].Put(bp)
}

// readAhead opens the needed files of one batch ahead of the writer. Its
// window bounds memory: at most 2*width files are open (or held in
// buffers of aheadMax) at once.
type readAhead struct {
	s       Source
	entries []model.Entry
	idx     []int // the entries to open, in order
	res     []aheadFile
	ready   []chan struct{}
	window  chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	next    int // the writer's position in idx
	ctr     *metrics.Stream
}

type aheadFile struct {
	f   *File
	err error
}

// startReadAhead starts the readers for the files of entries that need
// says, or returns nil where the source is fast (then OpenIn is the way).
func (s Source) startReadAhead(entries []model.Entry, need []bool, ctr *metrics.Stream) *readAhead {
	width := s.IO.Width()
	if width <= 1 {
		return nil
	}
	var idx []int
	for i := range entries {
		if entries[i].Kind == model.KindFile && need[i] {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return nil
	}
	width = min(width, len(idx))
	ra := &readAhead{s: s, entries: entries, idx: idx, res: make([]aheadFile, len(idx)), ready: make([]chan struct{}, len(idx)),
		window: make(chan struct{}, 2*width), stop: make(chan struct{}), ctr: ctr}
	for k := range ra.ready {
		ra.ready[k] = make(chan struct{})
	}
	work := make(chan int)
	ra.wg.Go(func() {
		defer close(work)
		for k := range idx {
			select {
			case ra.window <- struct{}{}:
			case <-ra.stop:
				return
			}
			select {
			case work <- k:
			case <-ra.stop:
				return
			}
		}
	})
	dirs := SharedDirs()
	var readers sync.WaitGroup
	for range width {
		readers.Go(func() {
			for k := range work {
				s.IO.Acquire()
				ra.res[k] = s.load(dirs, &entries[idx[k]])
				s.IO.Release()
				close(ra.ready[k])
			}
		})
	}
	ra.wg.Go(func() {
		readers.Wait()
		dirs.Close()
	})
	return ra
}

// load opens e and, if it is small, reads it whole and checks that it did
// not change while read.
func (s Source) load(d *Dirs, e *model.Entry) aheadFile {
	f, err := s.OpenIn(d, e)
	if err != nil || e.Size > aheadMax {
		return aheadFile{f, err}
	}
	bp := aheadGet(e.Size)
	buf := (*bp)[:e.Size]
	n, rerr := io.ReadFull(ratelimit.Reader(f, s.Limit), buf)
	f.ahead = bp // from now on, Read reads buf
	if rerr == io.ErrUnexpectedEOF || rerr == io.EOF {
		rerr = nil // shrank: the writer pads it and withdraws it
	}
	f.pre, f.preErr = buf[:n], rerr
	if rerr == nil && n == len(buf) {
		f.checked, f.checkErr = true, s.Recheck(f, e)
	}
	return aheadFile{f: f}
}

// open returns the next file, which must be entry i: opened, and read if
// small. The time the writer waits for it is the stream's read time.
func (ra *readAhead) open(i int) (*File, error) {
	if ra == nil {
		return nil, nil
	}
	k := ra.next
	if k >= len(ra.idx) || ra.idx[k] != i {
		panic("readAhead: files taken out of order")
	}
	ra.next++
	start := time.Now()
	<-ra.ready[k]
	if ra.ctr != nil {
		ra.ctr.ReadNanos.Add(int64(time.Since(start)))
	}
	<-ra.window
	r := ra.res[k]
	ra.res[k] = aheadFile{}
	return r.f, r.err
}

// close stops the readers and closes the files they opened that the
// writer did not take.
func (ra *readAhead) close() {
	if ra == nil {
		return
	}
	close(ra.stop)
	ra.wg.Wait()
	for k := ra.next; k < len(ra.res); k++ {
		if f := ra.res[k].f; f != nil {
			f.Close()
		}
	}
}
