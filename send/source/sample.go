package source

import (
	"io"

	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Sample reads file data of m's needed files into buf, for the choice of
// compression: the starts of up to maxFiles of them spread over the batch,
// an equal share of size bytes each (a batch's first files alone once
// sent whole batches of text plain because a random .bin led them). On a slow source (its
// gauge allows more than one operation at once) as many files at once as
// it allows: one after the other, the opens of a sample cost a round trip
// each, and held each batch back by as many.
func (s Source) Sample(m *wire.BatchManifest, need []bool, buf []byte, size, maxFiles int) []byte {
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	files := 0
	for i := range m.Entries {
		if e := &m.Entries[i]; e.Kind == model.KindFile && need[i] && e.Size > 0 {
			files++
		}
	}
	if files == 0 {
		return buf
	}
	k := min(files, maxFiles)
	share := size / k
	picks := make([]*model.Entry, 0, k)
	nth := 0 // the needed file at hand
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Kind != model.KindFile || !need[i] || e.Size == 0 {
			continue
		}
		if nth++; nth-1 == len(picks)*files/k {
			if picks = append(picks, e); len(picks) == k {
				break
			}
		}
	}
	// Each file's share has its place in buf; what a file did not fill
	// (it shrank, or could not be opened) is squeezed out after.
	buf = buf[:k*share]
	got := make([]int, k)
	width := s.IO.Width()
	dirs := &Dirs{}
	if width > 1 {
		dirs = SharedDirs()
	}
	defer dirs.Close()
	ioconc.ForEach(k, width, func(_, j int) {
		if width > 1 {
			s.IO.Acquire()
			defer s.IO.Release()
		}
		e := picks[j]
		f, err := s.OpenIn(dirs, e)
		if err != nil {
			return
		}
		got[j], _ = io.ReadFull(f, buf[j*share:j*share+int(min(int64(share), e.Size))])
		f.Close()
	})
	n := 0
	for j, g := range got {
		n += copy(buf[n:], buf[j*share:j*share+g])
	}
	return buf[:n]
}
