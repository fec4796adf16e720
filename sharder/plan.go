package sharder

import (
	"bufio"
	"cmp"
	"container/heap"
	"context"
	varint "encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
)

// How a plan balances (see docs/scale-out.md): the entries of a directory
// (its files, symlinks, hard links and subdirectories' own entries) go
// into a piece of that directory; a piece is closed, and the directory's
// next entries start another, once it holds 1/(16N) of the bytes or of
// the entries walked so far (at least 1 MiB or 64 entries). So a directory
// stays whole in one part unless it is big enough to unbalance the parts.
// Once the walk is over, pieces are dealt largest first to the part whose
// larger share (bytes or entries, each against the mean of a part) grows
// least (LPT, on two dimensions at once). Every name of a hard-linked file
// goes with the piece of its first name, so a part keeps its links.
const (
	planPieceDiv     = 16
	planMinPieceSize = 1 << 20
	planMinPieceEnts = 64
	planTop          = 20

	planFileMode = 0o600 // parts, summary.txt (and the spill, by CreateTemp)
	planDirMode  = 0o700 // -o DIR, when plan makes it
)

// planDir is what the plan knows of one directory.
type planDir struct {
	piece        int32 // the piece its entries go to now; -1: none yet
	bytes, files int64 // of regular files in its whole subtree
	ownBytes     int64 // of regular files directly in it
}

// planPiece is a run of entries of one directory that goes to one part.
type planPiece struct {
	bytes, entries int64
	part           int32
}

// PlanOptions are what Plan needs beyond the tree.
type PlanOptions struct {
	Dir    string        // where the part files and summary.txt go (made if missing)
	Parts  int           // how many parts, at least 1
	NUL    bool          // NUL-separated part files
	Filter *filter.Rules // what the walk leaves out, as a move's

	// OnError and OnWarn are the walk's (see Options). OnBadName is
	// called for a name a newline-separated part cannot hold (without
	// NUL): it is left out of the parts.
	OnError   func(path string, err error)
	OnWarn    func(path, msg string)
	OnBadName func(path string)
}

// PlanResult is what a plan found and how well its parts balance.
type PlanResult struct {
	Stats            Stats
	Entries, Bytes   int64   // listed in the parts
	Errors           int64   // entries the walk could not read
	BadNames         int64   // names left out (see PlanOptions.OnBadName)
	ImbalanceBytes   float64 // how far the largest part is above the mean, in percent
	ImbalanceEntries float64
}

// Plan walks src (a directory, resolved) once and writes o.Parts part
// files, o.Dir/part-0001 ..., of balanced bytes and entry counts, which
// together list every entry of src exactly once, one path relative to src
// a line, for --files-from on as many hosts; and o.Dir/summary.txt with
// the counts, a size histogram and the largest files and directories. An
// error means no usable plan was written (the walk, or a file, failed);
// entries the walk could not read are counted in the result.
func Plan(ctx context.Context, src string, o PlanOptions) (PlanResult, error) {
	p := &planner{src: src, dir: o.Dir, n: o.Parts, nul: o.NUL, o: o,
		dirs: map[string]*planDir{}, links: map[string]int32{}}
	return p.run(ctx)
}

type planner struct {
	src, dir string
	n        int
	nul      bool
	o        PlanOptions

	mu       sync.Mutex
	spill    *bufio.Writer
	spillF   *os.File
	spillErr error
	dirs     map[string]*planDir
	pieces   []planPiece
	links    map[string]int32 // first names of hard-linked files -> piece
	pending  []model.Entry    // hard links whose first name was not placed yet
	bytes    int64            // walked so far
	entries  int64
	st       Stats
	errs     int64
	hist     [33]struct{ files, bytes int64 } // [0]: empty; [k]: [4^(k-1), 4^k)
	top      topFiles
	badNames int64 // names a newline-separated list cannot hold
}

func (p *planner) run(ctx context.Context) (PlanResult, error) {
	if p.n < 1 {
		return PlanResult{}, fmt.Errorf("plan: %d parts: want 1 or more", p.n)
	}
	// The parts and the summary name every file of the tree: readable by
	// this user only (planFileMode, in a new directory of planDirMode). A
	// directory or file that exists keeps its mode.
	if err := os.MkdirAll(p.dir, planDirMode); err != nil {
		return PlanResult{}, fmt.Errorf("plan: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(p.dir, "part-[0-9][0-9][0-9][0-9]*"))
	for _, f := range old {
		os.Remove(f)
	}
	f, err := os.CreateTemp(p.dir, ".plan-spill-")
	if err != nil {
		return PlanResult{}, fmt.Errorf("plan: %w", err)
	}
	defer func() { f.Close(); os.Remove(f.Name()) }()
	p.spillF, p.spill = f, bufio.NewWriterSize(f, 1<<20)

	opt := Options{
		Filter:   p.o.Filter,
		FileCost: -1,
		Deferred: p.deferred,
		OnError: func(path string, err error) {
			p.errs++
			if p.o.OnError != nil {
				p.o.OnError(path, err)
			}
		},
		OnWarn: p.o.OnWarn,
	}
	batches := make(chan *model.Batch, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range batches {
			p.mu.Lock()
			for i := range b.Entries {
				p.file(&b.Entries[i])
			}
			p.mu.Unlock()
		}
	}()
	st, err := Run(ctx, p.src, opt, batches)
	<-done
	if err != nil {
		return PlanResult{}, fmt.Errorf("plan: walk %s: %w", p.src, err)
	}
	p.st = st
	for _, e := range p.pending {
		pi, ok := p.links[e.Link]
		if !ok { // its first name was not placed: keep it anyway
			pi = p.pieceOf(parentOf(e.Path))
		}
		p.put(pi, e.Path, 0)
	}
	p.pending = nil
	if err := p.spill.Flush(); err != nil && p.spillErr == nil {
		p.spillErr = err
	}
	if p.spillErr != nil {
		return PlanResult{}, fmt.Errorf("plan: %w", p.spillErr)
	}
	loads := p.assign()
	if err := p.writeParts(); err != nil {
		return PlanResult{}, fmt.Errorf("plan: %w", err)
	}
	if err := p.writeSummary(loads); err != nil {
		return PlanResult{}, fmt.Errorf("plan: %w", err)
	}
	r := PlanResult{Stats: st, Entries: p.entries, Bytes: p.bytes, Errors: p.errs, BadNames: p.badNames}
	r.ImbalanceBytes, r.ImbalanceEntries = imbalance(loads)
	return r, nil
}

func parentOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

// dirOf returns the record of directory d, made if new.
func (p *planner) dirOf(d string) *planDir {
	pd := p.dirs[d]
	if pd == nil {
		pd = &planDir{piece: -1}
		p.dirs[strings.Clone(d)] = pd
	}
	return pd
}

// pieceOf returns the piece the next entry of directory d goes to,
// starting a new one when the current one is full.
func (p *planner) pieceOf(d string) int32 {
	pd := p.dirOf(d)
	if pd.piece >= 0 {
		pc := &p.pieces[pd.piece]
		capB := max(planMinPieceSize, p.bytes/int64(planPieceDiv*p.n))
		capE := max(planMinPieceEnts, p.entries/int64(planPieceDiv*p.n))
		if pc.bytes < capB && pc.entries < capE {
			return pd.piece
		}
	}
	p.pieces = append(p.pieces, planPiece{})
	pd.piece = int32(len(p.pieces) - 1)
	return pd.piece
}

// put counts an entry into piece pi and spills it.
func (p *planner) put(pi int32, rel string, size int64) {
	pc := &p.pieces[pi]
	pc.bytes += size
	pc.entries++
	p.bytes += size
	p.entries++
	if !p.nul && (strings.ContainsRune(rel, '\n') || strings.HasSuffix(rel, "\r")) {
		p.badNames++
		if p.o.OnBadName != nil {
			p.o.OnBadName(rel)
		}
		return
	}
	if p.spillErr != nil {
		return
	}
	var hdr [2 * varint.MaxVarintLen64]byte
	n := varint.PutUvarint(hdr[:], uint64(pi))
	n += varint.PutUvarint(hdr[n:], uint64(len(rel)))
	if _, err := p.spill.Write(hdr[:n]); err != nil {
		p.spillErr = err
		return
	}
	if _, err := p.spill.WriteString(rel); err != nil {
		p.spillErr = err
	}
}

// file places a regular file (called with p.mu held).
func (p *planner) file(e *model.Entry) {
	d := parentOf(e.Path)
	pi := p.pieceOf(d)
	p.put(pi, e.Path, e.Size)
	if e.Nlink > 1 {
		p.links[e.Path] = pi
	}
	p.dirOf(d).ownBytes += e.Size
	for a := d; ; a = parentOf(a) {
		pd := p.dirOf(a)
		pd.bytes += e.Size
		pd.files++
		if a == "." {
			break
		}
	}
	k := 0
	if e.Size > 0 {
		for k = 1; k < len(p.hist)-1 && e.Size >= int64(1)<<(2*k); k++ {
		}
	}
	p.hist[k].files++
	p.hist[k].bytes += e.Size
	p.top.offer(e.Path, e.Size)
}

// deferred places a directory, symlink or hard link.
func (p *planner) deferred(e model.Entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case model.KindHardlink:
		if pi, ok := p.links[e.Link]; ok {
			p.put(pi, e.Path, 0)
		} else {
			p.pending = append(p.pending, e)
		}
		return
	case model.KindDir:
		p.dirOf(e.Path)
	}
	p.put(p.pieceOf(parentOf(e.Path)), e.Path, 0)
}

// assign deals the pieces to parts, largest first, each to the part whose
// larger relative load grows least; it returns the parts' loads.
func (p *planner) assign() []planPiece {
	meanB := max(float64(p.bytes)/float64(p.n), 1)
	meanE := max(float64(p.entries)/float64(p.n), 1)
	weight := func(b, e int64) float64 { return max(float64(b)/meanB, float64(e)/meanE) }
	order := make([]int32, len(p.pieces))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		pa, pb := &p.pieces[a], &p.pieces[b]
		return cmp.Compare(weight(pb.bytes, pb.entries), weight(pa.bytes, pa.entries))
	})
	loads := make([]planPiece, p.n)
	for _, i := range order {
		pc := &p.pieces[i]
		best, bestW := 0, 0.0
		for k := range loads {
			w := weight(loads[k].bytes+pc.bytes, loads[k].entries+pc.entries)
			if k == 0 || w < bestW {
				best, bestW = k, w
			}
		}
		pc.part = int32(best)
		loads[best].bytes += pc.bytes
		loads[best].entries += pc.entries
	}
	return loads
}

// writeParts routes the spilled entries to their parts' files.
func (p *planner) writeParts() error {
	files := make([]*os.File, p.n)
	ws := make([]*bufio.Writer, p.n)
	for i := range files {
		f, err := os.OpenFile(filepath.Join(p.dir, fmt.Sprintf("part-%04d", i+1)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, planFileMode)
		if err != nil {
			return err
		}
		defer f.Close()
		files[i], ws[i] = f, bufio.NewWriterSize(f, 64<<10)
	}
	if _, err := p.spillF.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(p.spillF, 1<<20)
	sep := byte('\n')
	if p.nul {
		sep = 0
	}
	var name []byte
	for {
		pi, err := varint.ReadUvarint(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading back the spill file: %w", err)
		}
		n, err := varint.ReadUvarint(r)
		if err != nil || pi >= uint64(len(p.pieces)) || n > 1<<20 {
			return fmt.Errorf("reading back the spill file: corrupt (%v)", err)
		}
		name = slices.Grow(name[:0], int(n))[:n]
		if _, err := io.ReadFull(r, name); err != nil {
			return fmt.Errorf("reading back the spill file: %w", err)
		}
		w := ws[p.pieces[pi].part]
		// A name starting with # or ; would be a comment in a
		// newline-separated list: "./" keeps it a name.
		if !p.nul && len(name) > 0 && (name[0] == '#' || name[0] == ';') {
			w.WriteString("./")
		}
		w.Write(name)
		w.WriteByte(sep)
	}
	for i, w := range ws {
		if err := w.Flush(); err != nil {
			return err
		}
		if err := files[i].Close(); err != nil {
			return err
		}
	}
	return nil
}

// imbalance is how far the largest part is above the mean, in percent, in
// bytes and in entries.
func imbalance(loads []planPiece) (bytes, entries float64) {
	var sb, se, mb, me int64
	for _, l := range loads {
		sb += l.bytes
		se += l.entries
		mb = max(mb, l.bytes)
		me = max(me, l.entries)
	}
	pct := func(m, s int64) float64 {
		if s == 0 {
			return 0
		}
		return (float64(m)*float64(len(loads))/float64(s) - 1) * 100
	}
	return pct(mb, sb), pct(me, se)
}

func (p *planner) writeSummary(loads []planPiece) error {
	var b strings.Builder
	st := p.st
	termsafe.Printf(&b, "bulkmove plan of %s into %d parts\n\n", p.src, p.n)
	fmt.Fprintf(&b, "entries      %d\nfiles        %d\nbytes        %d (%s)\ndirectories  %d\nsymlinks     %d\nhard links   %d\nexcluded     %d\nskipped      %d (sockets, devices, FIFOs)\nerrors       %d\n",
		p.entries, st.Files, p.bytes, units.Size(p.bytes), st.Dirs, st.Symlinks, st.Hardlinks, st.Excluded, st.Skipped, p.errs)
	bi, ei := imbalance(loads)
	fmt.Fprintf(&b, "\nparts (%d pieces; the largest part is %+.1f%% of the mean in bytes, %+.1f%% in entries)\n", len(p.pieces), bi, ei)
	fmt.Fprintf(&b, "%-10s %12s %16s %10s\n", "part", "entries", "bytes", "")
	for i, l := range loads {
		fmt.Fprintf(&b, "part-%04d  %12d %16d %10s\n", i+1, l.entries, l.bytes, units.Size(l.bytes))
	}
	fmt.Fprintf(&b, "\nfile sizes (powers of 4)\n%-22s %12s %16s\n", "size", "files", "bytes")
	for k, h := range p.hist {
		if h.files == 0 {
			continue
		}
		label := "0 (empty)"
		if k > 0 {
			label = fmt.Sprintf("[%s, %s)", units.Exact(int64(1)<<(2*(k-1))), units.Exact(int64(1)<<(2*k)))
		}
		fmt.Fprintf(&b, "%-22s %12d %16d\n", label, h.files, h.bytes)
	}
	fmt.Fprintf(&b, "\nlargest files\n")
	for _, f := range p.top.sorted() {
		termsafe.Printf(&b, "%16d %10s  %s\n", f.size, units.Size(f.size), f.path)
	}
	var tops topFiles
	for d, pd := range p.dirs {
		if d != "." {
			tops.offer(d, pd.bytes)
		}
	}
	fmt.Fprintf(&b, "\nlargest directories (bytes of their whole subtree; files in it; bytes directly in it)\n")
	for _, f := range tops.sorted() {
		pd := p.dirs[f.path]
		termsafe.Printf(&b, "%16d %10s %10d %16d  %s\n", pd.bytes, units.Size(pd.bytes), pd.files, pd.ownBytes, f.path)
	}
	return os.WriteFile(filepath.Join(p.dir, "summary.txt"), []byte(b.String()), planFileMode)
}

// topFiles keeps the planTop largest (path, size) pairs: a min-heap.
type topFiles []sized

type sized struct {
	path string
	size int64
}

func (t topFiles) Len() int           { return len(t) }
func (t topFiles) Less(i, j int) bool { return t[i].less(t[j]) }
func (t topFiles) Swap(i, j int)      { t[i], t[j] = t[j], t[i] }
func (t *topFiles) Push(x any)        { *t = append(*t, x.(sized)) }
func (t *topFiles) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
	return x
}

func (t *topFiles) offer(path string, size int64) {
	s := sized{path, size}
	if len(*t) < planTop {
		heap.Push(t, s)
		return
	}
	if !(*t)[0].less(s) {
		return
	}
	(*t)[0] = s
	heap.Fix(t, 0)
}

func (a sized) less(b sized) bool { return a.size < b.size || a.size == b.size && a.path > b.path }

// sorted returns the kept pairs, largest first.
func (t topFiles) sorted() []sized {
	s := slices.Clone([]sized(t))
	slices.SortFunc(s, func(a, b sized) int {
		if c := cmp.Compare(b.size, a.size); c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
	return s
}
