package send_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport/local"
	"github.com/bulkmove/bulkmove/wire"
)

// tmpDir prefers a tmpfs: tens of thousands of creates on the VM disk are slow.
func tmpDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "bulkmove-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// pipeAgent starts an agent on root in this process and returns a client
// connected to it over pipes: the wire path, without processes or SSH.
func pipeAgent(t *testing.T, ctx context.Context, name, root string, src source.Source) *send.Client {
	t.Helper()
	return pipeAgentIO(t, ctx, name, root, src, 0)
}

// pipeAgentIO is pipeAgent with the receiver told to write ioConc files at once
// (0: its own choice).
func pipeAgentIO(t *testing.T, ctx context.Context, name, root string, src source.Source, ioConc int) *send.Client {
	t.Helper()
	return pipeAgentVia(t, ctx, name, root, src, ioConc, nil)
}

// pipeAgentVia is pipeAgentIO with the sender's writes going through
// wrap(the pipe to the agent), if wrap is not nil: a connection that
// breaks, say.
func pipeAgentVia(t *testing.T, ctx context.Context, name, root string, src source.Source, ioConc int, wrap func(io.WriteCloser) io.Writer) *send.Client {
	t.Helper()
	toAgentW, fromAgentR, done := serveOverPipes(ctx, root)
	t.Cleanup(func() { toAgentW.Close(); <-done })
	var w io.Writer = toAgentW
	if wrap != nil {
		w = wrap(toAgentW)
	}
	c, err := send.Dial(ctx, name, fromAgentR, w, closers{toAgentW, fromAgentR}, "test",
		wire.ReceiveOptions{Owner: os.Geteuid() == 0, Check: "quick", IOConcurrency: ioConc}, src)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tcpAgent starts an agent on root in this process and returns a client
// connected to it over loopback TCP, sending no content hashes: bodies go
// by sendfile and the larger ones are received by splice.
func tcpAgent(t *testing.T, ctx context.Context, name, root string, src source.Source) *send.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			done <- err
			return
		}
		err = receive.Serve(ctx, c, c, root, "test")
		c.Close()
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); <-done })
	cl, err := send.Dial(ctx, name, c, c, c, "test", wire.ReceiveOptions{Owner: os.Geteuid() == 0, Check: "quick", NoSums: true}, src)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// serveOverPipes runs an agent on root in this process, reached through
// pipes: what to write to it, what it answers, and its result once it ends.
func serveOverPipes(ctx context.Context, root string) (*io.PipeWriter, *io.PipeReader, <-chan error) {
	toAgentR, toAgentW := io.Pipe()
	fromAgentR, fromAgentW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := receive.Serve(ctx, toAgentR, fromAgentW, root, "test")
		fromAgentW.CloseWithError(io.EOF)
		toAgentR.Close()
		done <- err
	}()
	return toAgentW, fromAgentR, done
}

type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

type transport struct {
	name string
	open func(t *testing.T, ctx context.Context, k int, dst string, src source.Source) []send.Conn
}

// transports is the conformance matrix: every pool test runs on each.
var transports = []transport{
	{"local", func(t *testing.T, ctx context.Context, k int, dst string, src source.Source) []send.Conn {
		return localConns(t, k, dst, src, extract.Options{Owner: os.Geteuid() == 0})
	}},
	{"wire", func(t *testing.T, ctx context.Context, k int, dst string, src source.Source) []send.Conn {
		return agentConns(k, func(name string) *send.Client { return pipeAgent(t, ctx, name, dst, src) })
	}},
	// Many file operations at once on both sides (a slow filesystem's
	// setting): readers ahead of each stream, writers at the receiver,
	// commits beside the next batch.
	{"local-io", func(t *testing.T, ctx context.Context, k int, dst string, src source.Source) []send.Conn {
		src.IO = ioconc.Fixed(16)
		return localConns(t, k, dst, src, extract.Options{Owner: os.Geteuid() == 0, IOConcurrency: 16})
	}},
	// An agent over loopback TCP, without the end-to-end hashes
	// (--transport tcp --no-verify-transfer): file bodies go by sendfile
	// (all of them in this package's tests, see export_test.go), and
	// those of 64 KiB or more are received by splice.
	{"tcp-sendfile", func(t *testing.T, ctx context.Context, k int, dst string, src source.Source) []send.Conn {
		return agentConns(k, func(name string) *send.Client { return tcpAgent(t, ctx, name, dst, src) })
	}},
	{"wire-io", func(t *testing.T, ctx context.Context, k int, dst string, src source.Source) []send.Conn {
		src.IO = ioconc.Fixed(16)
		return agentConns(k, func(name string) *send.Client { return pipeAgentIO(t, ctx, name, dst, src, 16) })
	}},
}

// localConns opens k streams from src into one receiver on dst, in this
// process, with no wire between them.
func localConns(t *testing.T, k int, dst string, src source.Source, opt extract.Options) []send.Conn {
	t.Helper()
	recv, err := extract.Open(dst, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.Close() })
	conns := make([]send.Conn, k)
	for i := range conns {
		conns[i] = &local.Conn{Recv: recv, Src: src}
	}
	return conns
}

// agentConns opens k streams, each to an agent of its own that dial
// starts for the stream of that name.
func agentConns(k int, dial func(name string) *send.Client) []send.Conn {
	conns := make([]send.Conn, k)
	for i := range conns {
		conns[i] = dial(fmt.Sprintf("stream %d", i))
	}
	return conns
}

type collector struct {
	mu      sync.Mutex
	results []send.Result
}

func (c *collector) add(r send.Result) {
	c.mu.Lock()
	c.results = append(c.results, r)
	c.mu.Unlock()
}

func (c *collector) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.results {
		for _, e := range r.Ack.Errors {
			out = append(out, e.Msg)
		}
		for _, e := range r.SrcErrors {
			out = append(out, e.Err.Error())
		}
	}
	return out
}

// done counts, per path, the results that reported the file in place: not
// an error and not to go again (what a resume journal records).
func (c *collector) done() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, r := range c.results {
		if r.Final || r.Ack == nil {
			continue
		}
		bad := r.Failed()
		for i, e := range r.Batch.Entries {
			if e.Kind == model.KindFile && !bad[i] {
				out[e.Path]++
			}
		}
	}
	return out
}

// move walks src and moves it to dst over conns.
func move(t *testing.T, ctx context.Context, src string, conns []send.Conn, opt sharder.Options, mutate func()) (*send.Pool, *collector) {
	t.Helper()
	return moveWith(t, ctx, src, conns, opt, mutate, nil)
}

// moveWith is move with the pool configured by configure first.
func moveWith(t *testing.T, ctx context.Context, src string, conns []send.Conn, opt sharder.Options, mutate func(), configure func(*send.Pool)) (*send.Pool, *collector) {
	t.Helper()
	col := &collector{}
	def := &send.Deferred{}
	opt.Deferred = def.Add
	batches := make(chan *model.Batch, 1024)
	if _, err := sharder.Run(ctx, src, opt, batches); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate()
	}
	pool := &send.Pool{Conns: conns, OnResult: col.add}
	if configure != nil {
		configure(pool)
	}
	if err := pool.Run(ctx, batches, def); err != nil {
		t.Fatal(err)
	}
	return pool, col
}

// trial is one run of a pool test on one transport: a fresh directory,
// with SRC and DEST to be in it.
type trial struct {
	ctx           context.Context
	tr            transport
	dir, src, dst string
}

// open opens k streams of the trial's transport from its SRC to its DEST.
func (c trial) open(t *testing.T, k int) []send.Conn {
	t.Helper()
	return c.tr.open(t, c.ctx, k, c.dst, source.Source{Root: c.src})
}

// eachTransport runs f on every transport of the matrix, each a subtest
// of its own, then checks that no goroutine is left.
func eachTransport(t *testing.T, f func(t *testing.T, c trial)) {
	t.Helper()
	defer goleak.VerifyNone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			dir := tmpDir(t)
			f(t, trial{ctx: context.Background(), tr: tr, dir: dir, src: filepath.Join(dir, "src"), dst: filepath.Join(dir, "dst")})
		})
	}
}

// writeNamed makes dir and in it a file of each name, holding the name
// 1000 times.
func writeNamed(t *testing.T, dir string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(strings.Repeat(n, 1000)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// refused checks that errs names each of names and that none of them is
// at dst.
func refused(t *testing.T, errs, dst string, names ...string) {
	t.Helper()
	for _, n := range names {
		if !strings.Contains(errs, n) {
			t.Errorf("no error names %q; errors:\n%s", n, errs)
		}
		if _, err := os.Lstat(filepath.Join(dst, n)); err == nil {
			t.Errorf("%s landed at the destination", n)
		}
	}
}

func TestMoveMixedTree(t *testing.T) {
	eachTransport(t, func(t *testing.T, c trial) {
		if err := gentree.Mixed(c.src, 3000, 7); err != nil {
			t.Fatal(err)
		}
		_, col := move(t, c.ctx, c.src, c.open(t, 3), sharder.Options{BatchFiles: 100}, nil)
		if errs := col.errors(); len(errs) > 0 {
			t.Fatalf("errors: %q", errs)
		}
		treecmp.Equal(t, c.src, c.dst, treecmp.Options{Owner: os.Geteuid() == 0})
	})
}

// TestChangedSourceNeverLands: files that shrink, grow, vanish or change
// between the walk and the send are reported by path and never appear
// under their final name; the others land.
func TestChangedSourceNeverLands(t *testing.T) {
	eachTransport(t, func(t *testing.T, c trial) {
		src, dst := c.src, c.dst
		writeNamed(t, src, "shrinks", "grows", "vanishes", "touched", "fine")
		mutate := func() {
			os.WriteFile(filepath.Join(src, "shrinks"), []byte("x"), 0o644)
			f, _ := os.OpenFile(filepath.Join(src, "grows"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("more")
			f.Close()
			os.Remove(filepath.Join(src, "vanishes"))
			later := time.Now().Add(time.Hour)
			os.Chtimes(filepath.Join(src, "touched"), later, later)
		}
		_, col := move(t, c.ctx, src, c.open(t, 2), sharder.Options{}, mutate)
		refused(t, strings.Join(col.errors(), "\n"), dst, "shrinks", "grows", "vanishes", "touched")
		if b, err := os.ReadFile(filepath.Join(dst, "fine")); err != nil || string(b) != strings.Repeat("fine", 1000) {
			t.Errorf("fine: %v", err)
		}
		noTemps(t, dst)
	})
}

// TestWriteErrorFailsOneFile: a file the destination refuses midway (here
// larger than RLIMIT_FSIZE: EFBIG) fails alone, with its name and the
// cause; the stream goes on and the next file lands. (Over the wire the
// receiver once skipped the rest of such a body from the wrong place and
// broke the stream: "bad data stream: ... EOF".)
func TestWriteErrorFailsOneFile(t *testing.T) {
	eachTransport(t, func(t *testing.T, c trial) {
		src, dst := c.src, c.dst
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "a-big"), []byte(strings.Repeat("x", 300<<10)), 0o644)
		os.WriteFile(filepath.Join(src, "b-small"), []byte("fine"), 0o644)
		conns := c.open(t, 1)
		var old syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Skip(err)
		}
		lim := old
		lim.Cur = 100 << 10 // (the Go runtime ignores SIGXFSZ: writes fail with EFBIG)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			t.Skip(err)
		}
		_, col := move(t, c.ctx, src, conns, sharder.Options{}, nil)
		syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
		errs := strings.Join(col.errors(), "\n")
		if !strings.Contains(errs, "too large") {
			t.Errorf("errors %q, want a-big's EFBIG", errs)
		}
		refused(t, errs, dst, "a-big") // not even partly written
		if got, err := os.ReadFile(filepath.Join(dst, "b-small")); err != nil || string(got) != "fine" {
			t.Errorf("b-small after the failed file: %q, %v", got, err)
		}
		noTemps(t, dst)
	})
}

// TestChangedSourceRetried: with Restat, files that changed while read go
// once more, after the rest, with what they hold now; one that changes
// again is reported; a vanished one is reported.
func TestChangedSourceRetried(t *testing.T) {
	eachTransport(t, func(t *testing.T, c trial) {
		src, dst := c.src, c.dst
		writeNamed(t, src, "shrinks", "grows", "vanishes", "unstable", "fine")
		mutate := func() {
			os.WriteFile(filepath.Join(src, "shrinks"), []byte("x"), 0o644)
			os.WriteFile(filepath.Join(src, "grows"), []byte(strings.Repeat("grows", 2000)), 0o644)
			os.WriteFile(filepath.Join(src, "unstable"), []byte("y"), 0o644)
			os.Remove(filepath.Join(src, "vanishes"))
		}
		var retried []string
		_, col := moveWith(t, c.ctx, src, c.open(t, 2), sharder.Options{}, mutate, func(p *send.Pool) {
			p.Restat = func(e model.Entry) (model.Entry, bool) {
				retried = append(retried, e.Path)
				ne, ok := sharder.Restat(src, e)
				if e.Path == "unstable" {
					ne.Size++ // it changes again before the second read
				}
				return ne, ok
			}
		})
		errs := strings.Join(col.errors(), "\n")
		for _, n := range []string{"shrinks", "grows"} {
			want, _ := os.ReadFile(filepath.Join(src, n))
			if got, err := os.ReadFile(filepath.Join(dst, n)); err != nil || string(got) != string(want) {
				t.Errorf("%s: not moved with its new content (%v)", n, err)
			}
			if strings.Contains(errs, n) {
				t.Errorf("%s reported although the second read moved it:\n%s", n, errs)
			}
		}
		refused(t, errs, dst, "unstable", "vanishes")
		if !strings.Contains(errs, "changed") {
			t.Errorf("unstable and vanishes not reported as changed; errors:\n%s", errs)
		}
		if len(retried) != 4 {
			t.Errorf("Restat called for %q, want the 4 changed files", retried)
		}
		// A journal records what results report done: a file that goes
		// again must not be among them before it is in place, or an
		// interrupted run would resume without it.
		done := col.done()
		for _, n := range []string{"unstable", "vanishes"} {
			if done[n] != 0 {
				t.Errorf("%s reported done %d times, but it never landed", n, done[n])
			}
		}
		for _, n := range []string{"shrinks", "grows", "fine"} {
			if done[n] != 1 {
				t.Errorf("%s reported done %d times, want once (after its second read)", n, done[n])
			}
		}
		noTemps(t, dst)
	})
}

func noTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), extract.TempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

// TestBalance: on a tree of equal files, K streams pulling from one queue
// (with the tail split) finish within 10% of each other. The job lasts about
// a second, so one stall of a loaded CI host (a tenth of a second) can spread
// a single run; a balancer that leaves a stream a backlog does it every time,
// so the test fails only when three runs in a row are unbalanced.
func TestBalance(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 20,000 files")
	}
	const runs = 3
	eachTransport(t, func(t *testing.T, c trial) {
		src := c.src
		if err := gentree.Small(src, 20000, 200, 1024); err != nil {
			t.Fatal(err)
		}
		var spreads []string
		for run := range runs {
			c.dst = filepath.Join(c.dir, fmt.Sprintf("dst%d", run))
			pool, _ := move(t, c.ctx, src, c.open(t, 4), sharder.Options{}, nil)
			first, last, files := finishSpread(t, pool.Stats())
			if files != 20000 {
				t.Fatalf("%d files moved, want 20000", files)
			}
			spread := float64(last-first) / float64(last)
			if spread <= 0.10 {
				return
			}
			spreads = append(spreads, fmt.Sprintf("%.0f%% (first %v, last %v)", spread*100, first, last))
		}
		t.Errorf("streams finished apart in %d runs of %d: %s; want within 10%%", runs, runs, strings.Join(spreads, ", "))
	})
}

// finishSpread logs each stream's share and returns the earliest and the
// latest last acknowledgement, and the files moved in all.
func finishSpread(t *testing.T, st []send.StreamStats) (first, last time.Duration, files int64) {
	t.Helper()
	for i, s := range st {
		t.Logf("stream %d: %d batches, %d files, %d bytes, last ack at %v", i, s.Batches, s.Files, s.Bytes, s.Busy)
		if i == 0 || s.Busy < first {
			first = s.Busy
		}
		last = max(last, s.Busy)
		files += s.Files
	}
	return first, last, files
}

// TestMoveSpilled: with room for 3 deferred entries in memory, the
// directories, symlinks and hard links of a mixed tree (and the record of
// which stream wrote each hard-link target) go to disk and come back in
// the order the final phase needs: the copy has every link, and every
// directory's mtime (set deepest first, after what is inside it).
func TestMoveSpilled(t *testing.T) {
	eachTransport(t, func(t *testing.T, c trial) {
		ctx, src, dst, spillDir := c.ctx, c.src, c.dst, filepath.Join(c.dir, "spill")
		if err := gentree.Mixed(src, 3000, 11); err != nil {
			t.Fatal(err)
		}
		os.Mkdir(spillDir, 0o700)
		col := &collector{}
		def := &send.Deferred{Dir: spillDir, Mem: 3}
		defer def.Close()
		batches := make(chan *model.Batch, 1024)
		if _, err := sharder.Run(ctx, src, sharder.Options{BatchFiles: 50, Deferred: def.Add}, batches); err != nil {
			t.Fatal(err)
		}
		dirs, symlinks, links := def.Len()
		if dirs < 10 || symlinks < 10 || links < 10 {
			t.Fatalf("the mixed tree has %d directories, %d symlinks, %d hard links: too few to spill", dirs, symlinks, links)
		}
		// Final batches of 2 entries: several groups of them.
		pool := &send.Pool{Conns: c.open(t, 3), OnResult: col.add, FinalFiles: 2}
		if err := pool.Run(ctx, batches, def); err != nil {
			t.Fatal(err)
		}
		if errs := col.errors(); len(errs) > 0 {
			t.Fatalf("errors: %q", errs)
		}
		if ents, _ := os.ReadDir(spillDir); len(ents) != 0 {
			t.Errorf("spill files left with a name: %v", ents)
		}
		treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	})
}

// takeOrder is a stream that applies batches one at a time, in the order
// it takes them, and records that order and whether the walk was over
// when it took each.
type takeOrder struct {
	send.Conn
	walkDone  *atomic.Bool
	mu        sync.Mutex
	taken     []*model.Batch
	afterWalk []bool
}

func (o *takeOrder) Run(ctx context.Context, in <-chan *model.Batch, done func(send.Result)) ([]*model.Batch, error) {
	return runEach(ctx, o.Conn, in, done, func(b *model.Batch) error {
		o.mu.Lock()
		o.taken = append(o.taken, b)
		o.afterWalk = append(o.afterWalk, o.walkDone.Load())
		o.mu.Unlock()
		return nil
	})
}

func (o *takeOrder) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.taken)
}

// TestPoolOpening: with Pool.Opening, the first batches a stream takes are
// cut down to that weight (so that --compress auto measures the link
// early), and the ones after are whole again; every file lands.
func TestPoolOpening(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	dir := tmpDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Small(src, 1000, 10, 4096); err != nil {
		t.Fatal(err)
	}
	walked := make(chan *model.Batch, 100)
	def := &send.Deferred{}
	if _, err := sharder.Run(ctx, src, sharder.Options{BatchFiles: 100, Deferred: def.Add}, walked); err != nil {
		t.Fatal(err)
	}
	var originals []*model.Batch
	for b := range walked {
		originals = append(originals, b)
	}
	if len(originals) < 8 {
		t.Fatalf("the walk made %d batches, want 100 files each", len(originals))
	}
	recv, err := extract.Open(dst, extract.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	var walkDone atomic.Bool
	order := &takeOrder{Conn: &local.Conn{Recv: recv, Src: source.Source{Root: src}}, walkDone: &walkDone}
	fileCost := int64(4096 + sharder.DefaultFileCost)
	col := &collector{}
	pool := &send.Pool{Conns: []send.Conn{order}, OnResult: col.add, Opening: 10 * fileCost}
	in := make(chan *model.Batch)
	go func() {
		for _, b := range originals {
			in <- b
		}
		// The walk ends once the stream is well past its opening.
		for order.count() < 8 {
			time.Sleep(time.Millisecond)
		}
		walkDone.Store(true)
		close(in)
	}()
	if err := pool.Run(ctx, in, def); err != nil {
		t.Fatal(err)
	}
	if errs := col.errors(); len(errs) > 0 {
		t.Fatalf("errors: %q", errs)
	}
	whole := map[uint64]int{}
	for _, b := range originals {
		whole[b.ID] = len(b.Entries)
	}
	opening, wholeAfter := 0, 0
	for i, b := range order.taken {
		var c int64
		for _, e := range b.Entries {
			c += e.Size + sharder.DefaultFileCost
		}
		switch {
		case i < 4:
			if c > pool.Opening {
				t.Errorf("batch %d taken: %d files, weight %d, over the opening's %d", i, len(b.Entries), c, pool.Opening)
			}
			opening++
		case !order.afterWalk[i] && whole[b.ID] > 0:
			if len(b.Entries) != whole[b.ID] {
				t.Errorf("batch %d taken (id %d), after the opening and before the walk ended: %d files, want all %d", i, b.ID, len(b.Entries), whole[b.ID])
			}
			wholeAfter++
		}
	}
	if opening < 4 || wholeAfter < 3 {
		t.Errorf("%d batches taken in the opening, %d whole after it, want 4 and 3 or more", opening, wholeAfter)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
}
