// Package transporttest is the conformance suite of package transport: one
// set of tests that every transport passes, as rclone runs one suite
// against every backend. A transport's test calls Run with a function
// that sets the transport up for one test (Setup); the suite moves trees
// over it with the sending side's pool, as the engine does, and checks
// the destination with internal/treecmp:
//
//   - tree: a tree with every kind of entry (files, an empty file, a file
//     large enough to be split into ranges, directories with their modes
//     and mtimes, empty directories, symlinks, hard links) arrives whole;
//   - cut: the connection under a stream is broken while batches are in
//     flight; its batches go again, on another stream or on the stream
//     redialed, and the tree arrives whole;
//   - redial: a stream opened again by Redial carries batches of the same
//     job to the same receiver;
//   - stall: a stream whose connection stops moving bytes is found out by
//     the stall timeout, and the tree still arrives whole;
//   - refused: a receiver that refuses the handshake (a wrong token, a
//     protocol of another version) makes Open fail with an error that says
//     so, and nothing is written.
//
// A case a transport cannot be put through (a stream in this process has
// no connection to cut) is left out, and the test log says so; a missing
// prerequisite (sshd, root) skips the transport's test with Require, or
// fails it when $CI is set.
//
// It imports the sending side and the walk, as the engine does; nothing
// but tests imports it.
package transporttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/wire"
)

// Env is what the suite gives a transport's setup for one test.
type Env struct {
	// Src is the tree to move; Dst is where it goes (a directory that does
	// not exist yet, in a directory that does).
	Src, Dst string
	// Dialer is the job's handshake and the set-up of its clients (the
	// stall timeout the suite wants among them), for transports that carry
	// the wire protocol; Dialer.Options and Dialer.Src are the job's, for
	// those that do not.
	Dialer *transport.Dialer
}

// Setup is a transport ready for one test, and the means to hurt it.
type Setup struct {
	Transport transport.Transport
	// Cut, if set, breaks the connection under one stream, or under all
	// of them, as a network failure would, while the streams send. A
	// transport that cannot redial (Caps) must be left at least one.
	Cut func()
	// Stall, if set, stops (on) the connection under one stream, or under
	// all of them, from moving any byte while it stays open; off ends the
	// stall: new connections move bytes again, and the stalled ones may be
	// dropped rather than resumed (what they held need not arrive, as on
	// a network that lost it). The same rule as Cut's holds.
	Stall func(on bool)
	// Refused are transports to the same destination whose receiver
	// refuses the job at its handshake. They are opened only by the
	// "refused" test; each is closed at the end of the test.
	Refused []Refusal
}

// Refusal is a transport whose handshake the receiver refuses.
type Refusal struct {
	Name      string // what is wrong, e.g. "wrong token"
	Transport transport.Transport
	// Want is what Open's error must contain (case-insensitive).
	Want string
}

// StallTimeout is the stall timeout of the clients Env.Dialer sets up.
const StallTimeout = time.Second

// Require skips the test when a prerequisite is missing (why says which),
// or fails it when $CI is set: in CI every transport runs.
func Require(t testing.TB, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("prerequisite missing: %s", why)
	}
	t.Skipf("prerequisite missing: %s", why)
}

// Run runs the suite against the transport mk sets up. mk is called once
// for each test, with a fresh Env; it registers its own cleanups with t.
func Run(t *testing.T, mk func(t *testing.T, env Env) Setup) {
	t.Run("tree", func(t *testing.T) {
		env := newEnv(t)
		s := mk(t, env)
		h := newHarness(t, env, s)
		if err := h.move(context.Background(), 3, nil); err != nil {
			t.Fatalf("move: %v", err)
		}
		h.check()
	})
	t.Run("cut", func(t *testing.T) {
		env := newEnv(t)
		s := mk(t, env)
		if s.Cut == nil {
			t.Log("left out: the transport has no connection to cut")
			closeAll(t, s)
			return
		}
		h := newHarness(t, env, s)
		var once sync.Once
		err := h.move(context.Background(), 3, func(send.Result) { once.Do(s.Cut) })
		if err != nil {
			t.Fatalf("move with a stream cut: %v (warnings: %q)", err, h.warnings())
		}
		if !h.warned("lost") {
			t.Errorf("no stream was lost after the cut (warnings: %q)", h.warnings())
		}
		h.check()
	})
	t.Run("redial", func(t *testing.T) {
		env := newEnv(t)
		s := mk(t, env)
		if !s.Transport.Caps().Redial {
			if _, err := s.Transport.Redial(context.Background(), 0); !errors.Is(err, transport.ErrUnsupported) {
				t.Errorf("Redial without Caps().Redial: %v, want ErrUnsupported", err)
			}
			t.Log("left out: the transport does not redial")
			closeAll(t, s)
			return
		}
		h := newHarness(t, env, s)
		h.redialFirst = true
		if err := h.move(context.Background(), 2, nil); err != nil {
			t.Fatalf("move over a redialed stream: %v", err)
		}
		h.check()
	})
	t.Run("stall", func(t *testing.T) {
		env := newEnv(t)
		s := mk(t, env)
		if s.Stall == nil {
			t.Log("left out: the transport has no connection to stall")
			closeAll(t, s)
			return
		}
		h := newHarness(t, env, s)
		// The stall ends once a stream is found stalled, or after three
		// stall timeouts: closing a stream whose connection moves nothing
		// may itself wait for the connection (an SSH channel's close
		// message), as it would on a network that stopped for a while.
		// On a loaded machine a stream can be found stalled before the
		// stall (nothing moved for a second): that neither ends the
		// stall to come nor counts as finding it.
		var mu sync.Mutex
		var on, over bool
		var end func() bool
		begin := func() {
			mu.Lock()
			defer mu.Unlock()
			if on || over {
				return
			}
			on = true
			s.Stall(true)
			time.AfterFunc(3*StallTimeout, func() { end() })
		}
		// end ends the stall if it is on, and says whether it has begun.
		end = func() bool {
			mu.Lock()
			defer mu.Unlock()
			if on {
				s.Stall(false)
				on, over = false, true
			}
			return over
		}
		var once sync.Once
		stalled := make(chan struct{})
		h.onWarn = func(msg string) {
			if strings.Contains(msg, send.ErrStalled.Error()) && end() {
				once.Do(func() { close(stalled) })
			}
		}
		err := h.move(context.Background(), 3, func(send.Result) { begin() })
		end()
		if err != nil {
			t.Fatalf("move with a stream stalled: %v (warnings: %q)", err, h.warnings())
		}
		select {
		case <-stalled:
		default:
			t.Errorf("no stream was found stalled (warnings: %q)", h.warnings())
		}
		h.check()
	})
	t.Run("refused", func(t *testing.T) {
		env := newEnv(t)
		s := mk(t, env)
		defer closeAll(t, s)
		if len(s.Refused) == 0 {
			t.Log("left out: the transport has no handshake to refuse")
			return
		}
		for _, r := range s.Refused {
			t.Run(r.Name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				conns, err := r.Transport.Open(ctx, 2)
				if err == nil {
					for _, c := range conns {
						c.Close(ctx)
					}
					t.Fatalf("Open succeeded, want a refusal (%s)", r.Want)
				}
				if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(r.Want)) {
					t.Errorf("Open: %v; want an error saying %q", err, r.Want)
				}
				if names := written(t, env.Dst); len(names) > 0 {
					t.Errorf("a refused job wrote %q", names)
				}
			})
		}
	})
}

// closeAll closes the transports of a setup that no test used.
func closeAll(t *testing.T, s Setup) {
	t.Helper()
	if err := s.Transport.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, r := range s.Refused {
		r.Transport.Close()
	}
}

// written lists what is under dir ("" if dir does not exist).
func written(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func newEnv(t *testing.T) Env {
	t.Helper()
	dir := tmpDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := Tree(src); err != nil {
		t.Fatal(err)
	}
	return Env{Src: src, Dst: dst, Dialer: &transport.Dialer{
		Version: "transporttest",
		Options: wire.ReceiveOptions{Owner: os.Geteuid() == 0, Check: wire.CheckQuick},
		Src:     source.Source{Root: src},
		Configure: func(c *send.Client) {
			c.StallTimeout = StallTimeout
		},
		Warnf:  func(format string, args ...any) { t.Logf("warning: "+format, args...) },
		Tracef: func(format string, args ...any) { t.Logf(format, args...) },
	}}
}

// tmpDir prefers a tmpfs: the suite writes many small files.
func tmpDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "transporttest-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// harness moves env.Src to env.Dst over a setup's transport as the
// engine does: the walk feeding the pool, the deferred entries last.
type harness struct {
	t   *testing.T
	env Env
	s   Setup
	// redialFirst opens stream 0 again with Redial before the move,
	// dropping the one Open gave.
	redialFirst bool
	onWarn      func(string)

	mu    sync.Mutex
	warns []string
	errs  []string
}

func newHarness(t *testing.T, env Env, s Setup) *harness {
	return &harness{t: t, env: env, s: s}
}

// move runs the job over k streams, calling onResult (if set) with each
// acknowledged batch, and closes the transport.
func (h *harness) move(ctx context.Context, k int, onResult func(send.Result)) (err error) {
	tr := h.s.Transport
	defer func() {
		if cerr := tr.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("Close: %w", cerr)
		}
		for _, r := range h.s.Refused {
			r.Transport.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	conns, err := tr.Open(ctx, k)
	if err != nil {
		return fmt.Errorf("Open: %w", err)
	}
	// A transport may return its first streams while the others still
	// connect (Pending): the pool adds those with Add.
	pending := 0
	if p, ok := tr.(interface{ Pending() int }); ok {
		pending = p.Pending()
	}
	if len(conns)+pending != k {
		h.t.Errorf("Open(%d) opened %d streams, %d more pending", k, len(conns), pending)
	}
	if h.redialFirst {
		old := conns[0]
		if a, ok := old.(interface{ Abort() }); ok {
			a.Abort()
		} else {
			old.Close(ctx)
		}
		c, err := tr.Redial(ctx, 0)
		if err != nil {
			return fmt.Errorf("Redial: %w", err)
		}
		conns[0] = c
	}
	def := &send.Deferred{}
	defer def.Close()
	opt := sharder.Options{BatchFiles: 8, SplitSize: splitSize, Deferred: def.Add,
		OnError: func(p string, err error) { h.fail(fmt.Sprintf("walk %s: %v", p, err)) }}
	batches := make(chan *model.Batch, 16)
	pool := &send.Pool{Conns: conns, OnResult: func(r send.Result) {
		h.result(r)
		if onResult != nil {
			onResult(r)
		}
	}, OnWarn: h.warn, Retries: 5, ReconnectTimeout: 30 * time.Second}
	if tr.Caps().Redial {
		pool.Redial = tr.Redial
	}
	if pending > 0 {
		pool.Join, pool.AddConn = pending, tr.Add
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		_, err := sharder.Run(gctx, h.env.Src, opt, batches)
		return err
	})
	g.Go(func() error { return pool.Run(gctx, batches, def) })
	if err := g.Wait(); err != nil {
		return err
	}
	if errs := h.errors(); len(errs) > 0 {
		return fmt.Errorf("entries failed: %q", errs)
	}
	return nil
}

func (h *harness) result(r send.Result) {
	if r.Ack != nil {
		for _, e := range r.Ack.Errors {
			h.fail(fmt.Sprintf("%s: %s", r.Batch.Entries[e.Index].Path, e.Msg))
		}
	}
	for _, e := range r.SrcErrors {
		h.fail(e.Err.Error())
	}
}

func (h *harness) fail(msg string) {
	h.mu.Lock()
	h.errs = append(h.errs, msg)
	h.mu.Unlock()
}

func (h *harness) errors() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.errs
}

func (h *harness) warn(msg string) {
	h.t.Logf("pool: %s", msg)
	h.mu.Lock()
	h.warns = append(h.warns, msg)
	h.mu.Unlock()
	if h.onWarn != nil {
		h.onWarn(msg)
	}
}

func (h *harness) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.warns
}

func (h *harness) warned(s string) bool {
	for _, w := range h.warnings() {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

// check compares the destination with the source. A receiving session
// of a stream that failed may still be ending when the job is over (its
// connection's end reaches it a little later), and its temporaries go
// with it: the trees are compared again for a while before a difference
// counts.
func (h *harness) check() {
	h.t.Helper()
	opt := treecmp.Options{Owner: os.Geteuid() == 0}
	for end := time.Now().Add(settle); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if diffs, err := treecmp.Compare(h.env.Src, h.env.Dst, opt); err == nil && len(diffs) == 0 {
			return
		}
	}
	treecmp.Equal(h.t, h.env.Src, h.env.Dst, opt)
}

// settle is how long check waits for the receiving side to settle.
const settle = 5 * time.Second
