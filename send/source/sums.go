package source

import (
	"sync"

	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// hashWorkers bounds the files of one batch a stream hashes at once: a
// few, as each of the K streams hashes its own batch.
const hashWorkers = 4

// Sums hashes the regular files of a batch for checksum mode (wire.Sum,
// XXH3-128), up to hashWorkers files at once, reading them through the
// source as the data is read. A file that cannot be read, or that changed
// since the walk, gets no sum: the receiver then needs it, and it is sent
// (and rechecked) as usual.
func (s Source) Sums(entries []model.Entry) []wire.Sum {
	sums := make([]wire.Sum, len(entries))
	n := 0
	for i := range entries {
		if entries[i].Kind == model.KindFile && entries[i].Size > 0 {
			n++
		}
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(hashWorkers, n) {
		wg.Go(func() {
			var dirs Dirs // one each: Dirs is not safe for concurrent use
			defer dirs.Close()
			bp := bufPool.Get().(*[]byte)
			defer bufPool.Put(bp)
			for i := range jobs {
				sums[i] = s.sum(&dirs, &entries[i], *bp)
			}
		})
	}
	for i := range entries {
		switch e := &entries[i]; {
		case e.Kind != model.KindFile:
		case e.Size == 0:
			sums[i] = wire.EmptySum
		default:
			jobs <- i
		}
	}
	close(jobs)
	wg.Wait()
	return sums
}

// sum hashes one file; the zero Sum if it cannot.
func (s Source) sum(d *Dirs, e *model.Entry, buf []byte) wire.Sum {
	f, err := s.OpenIn(d, e)
	if err != nil {
		return wire.Sum{}
	}
	defer f.Close()
	sum, n, err := wire.HashReader(ratelimit.Reader(f, s.Limit), buf)
	if err != nil || n != e.Size || s.Recheck(f, e) != nil {
		return wire.Sum{}
	}
	return sum
}
