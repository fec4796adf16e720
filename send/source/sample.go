package source

import (
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// sampleWindows is how many places of a batch's data a sample is read from.
const sampleWindows = 16

// Sample reads file data of m's needed files into buf, for the choice of
// compression: about size bytes in sampleWindows windows spread evenly
// over the batch's data as the tar stream carries it (each file's data,
// or a split file's range, one after the other), so that each part of the
// batch counts by its bytes. A window that reaches past the end of a file
// goes on into the next ones, opening at most maxFiles files in all.
// (The starts of the files alone once sent whole batches plain whose
// files began with random bytes and ended with text, and a batch's first
// files alone whole batches of text because a random .bin led them.) On a
// slow source (its gauge allows more than one operation at once) as many
// files at once as it allows: one after the other, the opens of a sample
// cost a round trip each, and held each batch back by as many.
func (s Source) Sample(m *wire.BatchManifest, need []bool, buf []byte, size, maxFiles int) []byte {
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	pieces := samplePieces(m, need, int64(size), maxFiles)
	if len(pieces) == 0 {
		return buf[:0]
	}
	// Each piece has its place in buf; what a piece did not fill (its file
	// shrank, or could not be opened) is squeezed out after.
	at := make([]int, len(pieces)+1)
	for i, p := range pieces {
		at[i+1] = at[i] + p.n
	}
	buf = buf[:at[len(pieces)]]
	got := make([]int, len(pieces))
	// The pieces of one file are read through one open.
	var groups [][2]int
	for i := range pieces {
		if i == 0 || pieces[i].e != pieces[i-1].e {
			groups = append(groups, [2]int{i, i + 1})
		} else {
			groups[len(groups)-1][1] = i + 1
		}
	}
	width := s.IO.Width()
	dirs := &Dirs{}
	if width > 1 {
		dirs = SharedDirs()
	}
	defer dirs.Close()
	ioconc.ForEach(len(groups), width, func(_, g int) {
		if width > 1 {
			s.IO.Acquire()
			defer s.IO.Release()
		}
		first, end := groups[g][0], groups[g][1]
		f, err := s.OpenIn(dirs, pieces[first].e)
		if err != nil {
			return
		}
		defer f.Close()
		for i := first; i < end; i++ {
			p := pieces[i]
			got[i] = preadFull(f.fd, buf[at[i]:at[i]+p.n], p.e.Off+p.off)
		}
	})
	n := 0
	for i, g := range got {
		n += copy(buf[n:], buf[at[i]:at[i]+g])
	}
	return buf[:n]
}

// samplePiece is n bytes of entry e's data from off (within its data: a
// range's start is e.Off).
type samplePiece struct {
	e   *model.Entry
	off int64
	n   int
}

// samplePieces places Sample's windows over the needed files' data.
func samplePieces(m *wire.BatchManifest, need []bool, size int64, maxFiles int) []samplePiece {
	var total int64
	for i := range m.Entries {
		if e := &m.Entries[i]; e.Kind == model.KindFile && need[i] {
			total += max(e.DataLen(), 0)
		}
	}
	if total == 0 || size <= 0 {
		return nil
	}
	k := int64(sampleWindows)
	share := max(size/k, 1)
	if total <= size {
		k, share = 1, total // the whole of it
	}
	perWindow := max(maxFiles/int(k), 1)
	var pieces []samplePiece
	i, start := 0, int64(0) // the entry at hand and where its data starts
	var next int64          // where the last window ended
	for w := range k {
		// Window w centred in its k-th of the data.
		a := max(total*(2*w+1)/(2*k)-share/2, next, 0)
		b := min(a+share, total)
		next = b
		files := 0
		for a < b && i < len(m.Entries) && files < perWindow {
			e := &m.Entries[i]
			n := int64(0)
			if e.Kind == model.KindFile && need[i] {
				n = max(e.DataLen(), 0)
			}
			if start+n <= a {
				i, start = i+1, start+n
				continue
			}
			end := min(b, start+n)
			pieces = append(pieces, samplePiece{e: e, off: a - start, n: int(end - a)})
			files++
			a = end
			if end == start+n {
				i, start = i+1, start+n
			}
		}
	}
	return pieces
}

// preadFull reads p from fd at off, as much as there is (0 on an error).
func preadFull(fd int, p []byte, off int64) int {
	n := 0
	for n < len(p) {
		m, err := unix.Pread(fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	return n
}
