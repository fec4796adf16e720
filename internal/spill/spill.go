// Package spill keeps a list that may outgrow memory: up to a limit of
// items in memory, the rest in runs written to one unlinked temporary file,
// read back at the end in order (insertion order, or sorted: each run is
// sorted before it is written and the runs are merged, as an external merge
// sort). Memory is one run plus a read buffer per run, however long the
// list.
//
// bulkmove sets aside directories, symlinks and hard links until the file
// data has landed (they are applied at the end, directories deepest first);
// on a tree of tens of millions of entries that list is what would
// otherwise grow with the tree.
package spill

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
)

// Codec writes an item to bytes and reads it back.
type Codec[T any] interface {
	// Append appends v's encoding to b.
	Append(b []byte, v *T) []byte
	// Decode reads one item from b, which holds exactly one encoding.
	Decode(b []byte) (T, error)
}

// DefaultMem is how many items a List holds in memory before it writes a
// run, when New is given 0.
const DefaultMem = 1 << 14

// List is a list of T that spills to disk. The zero value is not usable:
// see New. Its methods are not safe for concurrent use.
type List[T any] struct {
	dir   string
	mem   int
	cmp   func(a, b *T) int
	codec Codec[T]

	buf  []T
	f    *os.File // the runs, one after the other; unlinked at creation
	runs []run
	end  int64 // where the next run starts in f
	n    int64
	err  error // the first write error; it sticks
	enc  []byte
}

type run struct{ off, len int64 }

// New returns an empty list that keeps up to mem items in memory (0:
// DefaultMem) and writes the rest to a temporary file in dir ("" :
// os.TempDir()). cmp, if not nil, orders the list: All then yields the
// items sorted by it, items that compare equal in the order they were
// added. With a nil cmp, All yields them in the order they were added.
func New[T any](dir string, mem int, cmp func(a, b *T) int, codec Codec[T]) *List[T] {
	if mem <= 0 {
		mem = DefaultMem
	}
	return &List[T]{dir: dir, mem: mem, cmp: cmp, codec: codec}
}

// Len is how many items were added.
func (l *List[T]) Len() int64 { return l.n }

// Spilled reports whether some items are on disk.
func (l *List[T]) Spilled() bool { return len(l.runs) > 0 }

// Err is the first error writing to disk; the items added since are lost.
func (l *List[T]) Err() error { return l.err }

// Add appends v. A failure to write a run (a full disk) is kept, returned
// here and by Err and Each; the list is then unusable.
func (l *List[T]) Add(v T) error {
	if l.err != nil {
		return l.err
	}
	l.buf = append(l.buf, v)
	l.n++
	if len(l.buf) >= l.mem {
		l.err = l.flush()
	}
	return l.err
}

// flush writes the items in memory as one run.
func (l *List[T]) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	l.sortBuf()
	start := l.end
	var err error
	if l.f, l.end, err = writeRun(l.f, l.dir, l.end, l.buf, l.codec, &l.enc); err != nil {
		return err
	}
	l.runs = append(l.runs, run{off: start, len: l.end - start})
	clear(l.buf)
	l.buf = l.buf[:0]
	return nil
}

// writeRun writes items at off in f, each as its length (a uvarint) and
// its encoding, creating f in dir, unlinked, if it is nil; it returns f
// and where the items end (off again after a failure).
func writeRun[T any](f *os.File, dir string, off int64, items []T, codec Codec[T], enc *[]byte) (*os.File, int64, error) {
	if f == nil {
		var err error
		if f, err = os.CreateTemp(dir, ".bulkmove-spill-*"); err != nil {
			return nil, off, fmt.Errorf("spill: %w", err)
		}
		// Unlinked at once: nothing is left behind, however the process ends.
		os.Remove(f.Name())
	}
	w := bufio.NewWriterSize(io.NewOffsetWriter(f, off), 256<<10)
	end := off
	for i := range items {
		*enc = codec.Append((*enc)[:0], &items[i])
		var hdr [binary.MaxVarintLen64]byte
		n := binary.PutUvarint(hdr[:], uint64(len(*enc)))
		w.Write(hdr[:n])
		w.Write(*enc)
		end += int64(n + len(*enc))
	}
	if err := w.Flush(); err != nil {
		return f, off, fmt.Errorf("spill: writing %s: %w", f.Name(), err)
	}
	return f, end, nil
}

func (l *List[T]) sortBuf() {
	if l.cmp != nil {
		slices.SortStableFunc(l.buf, func(a, b T) int { return l.cmp(&a, &b) })
	}
}

// Close releases the temporary file (it has no name on disk already).
func (l *List[T]) Close() error {
	l.buf = nil
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	l.runs = nil
	return err
}

// Each calls fn with the items in order, up to n at a time (each call
// gets a new slice, fn may keep it), until fn returns an error, which Each
// returns. Each may be called more than once; the list must not change
// while it runs.
func (l *List[T]) Each(n int, fn func([]T) error) error {
	n = max(n, 1)
	chunk := make([]T, 0, n)
	for v, err := range l.All() {
		if err != nil {
			return err
		}
		chunk = append(chunk, v)
		if len(chunk) == n {
			if err := fn(chunk); err != nil {
				return err
			}
			chunk = make([]T, 0, n)
		}
	}
	if len(chunk) > 0 {
		return fn(chunk)
	}
	return nil
}

// All yields the items in order; a failure to read them back is yielded
// last, with a zero item. The list must not change while it runs.
func (l *List[T]) All() iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		if l.err != nil {
			yield(zero, l.err)
			return
		}
		l.sortBuf()
		srcs := make([]*source[T], 0, len(l.runs)+1)
		for _, r := range l.runs {
			srcs = append(srcs, &source[T]{codec: l.codec, r: bufio.NewReaderSize(io.NewSectionReader(l.f, r.off, r.len), 16<<10), idx: len(srcs)})
		}
		srcs = append(srcs, &source[T]{mem: l.buf, idx: len(srcs)})
		if l.cmp == nil {
			// Insertion order: the runs one after the other, then memory.
			for _, s := range srcs {
				for {
					ok, err := s.next()
					if err != nil {
						yield(zero, err)
						return
					}
					if !ok {
						break
					}
					if !yield(s.cur, nil) {
						return
					}
				}
			}
			return
		}
		h := &merge[T]{cmp: l.cmp}
		for _, s := range srcs {
			ok, err := s.next()
			if err != nil {
				yield(zero, err)
				return
			}
			if ok {
				h.s = append(h.s, s)
			}
		}
		heap.Init(h)
		for h.Len() > 0 {
			s := h.s[0]
			if !yield(s.cur, nil) {
				return
			}
			ok, err := s.next()
			if err != nil {
				yield(zero, err)
				return
			}
			if ok {
				heap.Fix(h, 0)
			} else {
				heap.Pop(h)
			}
		}
	}
}

// source is one sorted run being read back, on disk or in memory.
type source[T any] struct {
	codec Codec[T]
	r     *bufio.Reader
	mem   []T
	idx   int // the run's place: equal items come out in run order
	cur   T
	buf   []byte
}

func (s *source[T]) next() (bool, error) {
	if s.r == nil {
		if len(s.mem) == 0 {
			return false, nil
		}
		s.cur, s.mem = s.mem[0], s.mem[1:]
		return true, nil
	}
	n, err := binary.ReadUvarint(s.r)
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("spill: reading back: %w", err)
	}
	if n > 1<<30 {
		return false, errors.New("spill: reading back: corrupt length")
	}
	if uint64(cap(s.buf)) < n {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return false, fmt.Errorf("spill: reading back: %w", err)
	}
	s.cur, err = s.codec.Decode(s.buf)
	if err != nil {
		return false, fmt.Errorf("spill: reading back: %w", err)
	}
	return true, nil
}

// merge is a min-heap of sources by their current item, then run order.
type merge[T any] struct {
	cmp func(a, b *T) int
	s   []*source[T]
}

func (m *merge[T]) Len() int { return len(m.s) }
func (m *merge[T]) Less(i, j int) bool {
	if c := m.cmp(&m.s[i].cur, &m.s[j].cur); c != 0 {
		return c < 0
	}
	return m.s[i].idx < m.s[j].idx
}
func (m *merge[T]) Swap(i, j int) { m.s[i], m.s[j] = m.s[j], m.s[i] }
func (m *merge[T]) Push(x any)    { m.s = append(m.s, x.(*source[T])) }
func (m *merge[T]) Pop() any {
	x := m.s[len(m.s)-1]
	m.s = m.s[:len(m.s)-1]
	return x
}

// Stack is a last-in first-out stack of T that spills to disk: up to mem
// items in memory (the top of the stack), the older ones in segments of
// mem/2 items written to one unlinked temporary file, read back when
// memory runs empty. Items come out in exactly the order an unbounded
// stack would give. The zero value is not usable: see NewStack. Its
// methods are not safe for concurrent use.
type Stack[T any] struct {
	dir   string
	mem   int
	codec Codec[T]

	buf  []T        // the top of the stack, newest last; newer than all of segs
	segs []stackSeg // on disk, oldest first
	f    *os.File
	end  int64 // where the next segment goes in f
	n    int64
	err  error // the first failure to write; then memory only grows
	enc  []byte
}

type stackSeg struct {
	off, len int64
	n        int
}

// NewStack returns an empty stack that keeps up to mem items in memory
// (0: DefaultMem; at least 2) and writes the rest to a temporary file in
// dir ("": os.TempDir()).
func NewStack[T any](dir string, mem int, codec Codec[T]) *Stack[T] {
	if mem <= 0 {
		mem = DefaultMem
	}
	return &Stack[T]{dir: dir, mem: max(mem, 2), codec: codec}
}

// Len is how many items are on the stack.
func (s *Stack[T]) Len() int64 { return s.n }

// InMem is how many of them are in memory.
func (s *Stack[T]) InMem() int { return len(s.buf) }

// Err is the first failure to write items to disk: they then stay in
// memory, which grows, and nothing is lost.
func (s *Stack[T]) Err() error { return s.err }

// Push puts v on top. With mem items in memory, the older half goes to
// disk; a failure to write it keeps it in memory (see Err).
func (s *Stack[T]) Push(v T) {
	s.buf = append(s.buf, v)
	s.n++
	if len(s.buf) < s.mem || s.err != nil {
		return
	}
	half := len(s.buf) / 2
	if err := s.write(s.buf[:half]); err != nil {
		s.err = err
		return
	}
	k := copy(s.buf, s.buf[half:])
	clear(s.buf[k:])
	s.buf = s.buf[:k]
}

// write appends items to the file as a new segment.
func (s *Stack[T]) write(items []T) error {
	start := s.end
	var err error
	if s.f, s.end, err = writeRun(s.f, s.dir, s.end, items, s.codec, &s.enc); err != nil {
		return err
	}
	s.segs = append(s.segs, stackSeg{off: start, len: s.end - start, n: len(items)})
	return nil
}

// Pop takes the item on top; false if the stack is empty. An error is a
// failure to read back a segment from disk: its items are lost (and no
// longer counted by Len), the ones below it are still there.
func (s *Stack[T]) Pop() (T, bool, error) {
	var zero T
	if len(s.buf) == 0 && len(s.segs) > 0 {
		seg := s.segs[len(s.segs)-1]
		s.segs = s.segs[:len(s.segs)-1]
		s.end = seg.off // the space is written over by the next segment
		src := &source[T]{codec: s.codec, r: bufio.NewReaderSize(io.NewSectionReader(s.f, seg.off, seg.len), 64<<10)}
		for range seg.n {
			ok, err := src.next()
			if err == nil && !ok {
				err = errors.New("spill: reading back: a segment cut short")
			}
			if err != nil {
				clear(s.buf)
				s.buf = s.buf[:0]
				s.n -= int64(seg.n)
				return zero, false, err
			}
			s.buf = append(s.buf, src.cur)
		}
	}
	if len(s.buf) == 0 {
		return zero, false, nil
	}
	v := s.buf[len(s.buf)-1]
	s.buf[len(s.buf)-1] = zero
	s.buf = s.buf[:len(s.buf)-1]
	s.n--
	return v, true, nil
}

// Close releases the temporary file; the stack is then empty.
func (s *Stack[T]) Close() error {
	s.buf, s.segs, s.n = nil, nil, 0
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// StringCodec stores a string as its bytes.
type StringCodec struct{}

func (StringCodec) Append(b []byte, v *string) []byte { return append(b, *v...) }
func (StringCodec) Decode(b []byte) (string, error)   { return string(b), nil }
