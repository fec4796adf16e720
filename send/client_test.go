package send_test

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// fakeAgent runs fn as the agent end of a client's pipes; the client's
// closer closes its own ends, which ends fn's reads and writes.
type fakeAgent struct {
	fromClient *bufio.Reader
	toClient   io.Writer
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// dialFake starts fn and dials it. done is closed when fn has returned.
func dialFake(t *testing.T, src source.Source, fn func(a *fakeAgent)) (*send.Client, error, <-chan struct{}) {
	t.Helper()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c2aR.Close()
		defer a2cW.Close()
		fn(&fakeAgent{fromClient: bufio.NewReader(c2aR), toClient: a2cW})
	}()
	var once sync.Once
	closer := closerFunc(func() error {
		once.Do(func() {
			c2aW.Close()
			a2cR.Close()
		})
		return nil
	})
	c, err := send.Dial(context.Background(), "box2 stream 0", a2cR, c2aW, closer, "test-sender", wire.ReceiveOptions{}, src)
	if err != nil {
		closer.Close()
	}
	t.Cleanup(func() {
		closer.Close()
		<-done
	})
	return c, err, done
}

// hello reads the client's hello and answers with h.
func (a *fakeAgent) hello(h wire.Handshake) error {
	typ, _, err := wire.ReadFrame(a.fromClient)
	if err != nil {
		return err
	}
	if typ != wire.Hello {
		return fmt.Errorf("client sent %q first", typ)
	}
	return wire.WriteFrame(a.toClient, wire.Hello, wire.EncodeJSON(h))
}

func (a *fakeAgent) drain() { io.Copy(io.Discard, a.fromClient) }

func TestDialShellBanner(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, err, done := dialFake(t, source.Source{}, func(a *fakeAgent) {
		// A login shell prints before it reads anything.
		go io.WriteString(a.toClient, "Welcome to box2\nLast login: Mon Jan 1 from 10.0.0.1\n")
		a.drain()
	})
	if err == nil {
		c.Abort()
		t.Fatal("Dial succeeded against a shell banner")
	}
	t.Log(err)
	if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "Welco") || !strings.Contains(err.Error(), "box2 stream 0") {
		t.Errorf("Dial: %v, want a protocol error naming the stream and quoting the banner", err)
	}
	<-done
}

func TestDialVersionMismatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, err, done := dialFake(t, source.Source{}, func(a *fakeAgent) {
		a.hello(wire.Handshake{Proto: 99, Version: "9.9.9"})
		a.drain()
	})
	if err == nil {
		c.Abort()
		t.Fatal("Dial succeeded against protocol 99")
	}
	t.Log(err)
	if !errors.Is(err, wire.ErrVersion) {
		t.Errorf("Dial: %v, want wire.ErrVersion", err)
	}
	for _, s := range []string{"99", "9.9.9", "test-sender", fmt.Sprintf("speaks %d", wire.Proto)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	<-done
}

func TestDialAgentGone(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, err, done := dialFake(t, source.Source{}, func(a *fakeAgent) {
		wire.ReadFrame(a.fromClient) // reads the hello, then exits
	})
	if err == nil {
		c.Abort()
		t.Fatal("Dial succeeded against an agent that left")
	}
	<-done
}

// srcTree writes files into a fresh source directory and returns batches
// of one file each.
func srcTree(t *testing.T, names ...string) (source.Source, []*model.Batch) {
	t.Helper()
	dir := t.TempDir()
	var bs []*model.Batch
	for i, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("content of "+n), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		e := model.Entry{Path: n, Kind: model.KindFile, Mode: 0o644, Size: fi.Size(), MTime: fi.ModTime().UnixNano(), Nlink: 1}
		bs = append(bs, &model.Batch{ID: uint64(i + 1), Entries: []model.Entry{e}, Bytes: fi.Size()})
	}
	return source.Source{Root: dir}, bs
}

// readBatchData reads a Data frame's tar stream and the Commit after it.
func (a *fakeAgent) readBatchData() (uint64, error) {
	tr := tar.NewReader(a.fromClient)
	for {
		_, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, tr)
	}
	typ, p, err := wire.ReadFrame(a.fromClient)
	if err != nil {
		return 0, err
	}
	if typ != wire.Commit {
		return 0, fmt.Errorf("client sent %q after the data, want a commit", typ)
	}
	id, _, err := wire.DecodeCommit(p)
	return id, err
}

// runFake runs the client's Run over batches against a fake agent that
// answers each frame with react, and returns what Run returned and which
// batches were reported done.
func runFake(t *testing.T, names []string, react func(a *fakeAgent, typ byte, p []byte) error) (done []uint64, unacked []*model.Batch, err error) {
	t.Helper()
	src, batches := srcTree(t, names...)
	c, err, agentDone := dialFake(t, src, func(a *fakeAgent) {
		if a.hello(wire.Handshake{Proto: wire.Proto, Version: "fake"}) != nil {
			return
		}
		for {
			typ, p, err := wire.ReadFrame(a.fromClient)
			if err != nil {
				return
			}
			if err := react(a, typ, p); err != nil {
				a.drain()
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	in := make(chan *model.Batch, len(batches))
	for _, b := range batches {
		in <- b
	}
	close(in)
	var mu sync.Mutex
	unacked, err = c.Run(context.Background(), in, func(r send.Result) {
		mu.Lock()
		done = append(done, r.Batch.ID)
		mu.Unlock()
	})
	c.Abort()
	<-agentDone
	return done, unacked, err
}

func ids(bs []*model.Batch) []uint64 {
	var out []uint64
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

func TestClientBadAcks(t *testing.T) {
	defer goleak.VerifyNone(t)
	needAll := func(a *fakeAgent, p []byte) error {
		m, err := wire.DecodeManifest(p)
		if err != nil {
			return err
		}
		need := make([]bool, len(m.Entries))
		for i := range need {
			need[i] = true
		}
		return wire.WriteFrame(a.toClient, wire.Need, wire.EncodeNeed(m.ID, need))
	}
	ack := func(a *fakeAgent, id uint64) error {
		return wire.WriteFrame(a.toClient, wire.Ack, wire.EncodeAck(&wire.BatchAck{ID: id, Files: 1}))
	}
	for _, tc := range []struct {
		name     string
		react    func(a *fakeAgent, typ byte, p []byte) error
		wantDone []uint64
	}{
		{name: "ack for a batch never sent", react: func(a *fakeAgent, typ byte, p []byte) error {
			if typ == wire.Manifest {
				return ack(a, 99)
			}
			return nil
		}},
		{name: "ack before the data", react: func(a *fakeAgent, typ byte, p []byte) error {
			if typ == wire.Manifest {
				m, _ := wire.DecodeManifest(p)
				return ack(a, m.ID)
			}
			return nil
		}},
		{name: "duplicate ack", wantDone: []uint64{1}, react: func(a *fakeAgent, typ byte, p []byte) error {
			switch typ {
			case wire.Manifest:
				m, _ := wire.DecodeManifest(p)
				if m.ID == 1 {
					return needAll(a, p)
				}
			case wire.Data:
				id, err := a.readBatchData()
				if err != nil {
					return err
				}
				if err := ack(a, id); err != nil {
					return err
				}
				return ack(a, id)
			}
			return nil
		}},
		{name: "ack naming an entry out of range", react: func(a *fakeAgent, typ byte, p []byte) error {
			switch typ {
			case wire.Manifest:
				return needAll(a, p)
			case wire.Data:
				id, err := a.readBatchData()
				if err != nil {
					return err
				}
				return wire.WriteFrame(a.toClient, wire.Ack, wire.EncodeAck(&wire.BatchAck{ID: id, Errors: []wire.EntryError{{Index: 5}}}))
			}
			return nil
		}},
		{name: "need for a batch never sent", react: func(a *fakeAgent, typ byte, p []byte) error {
			if typ == wire.Manifest {
				return wire.WriteFrame(a.toClient, wire.Need, wire.EncodeNeed(42, []bool{true}))
			}
			return nil
		}},
		{name: "need of the wrong length", react: func(a *fakeAgent, typ byte, p []byte) error {
			if typ == wire.Manifest {
				m, _ := wire.DecodeManifest(p)
				return wire.WriteFrame(a.toClient, wire.Need, wire.EncodeNeed(m.ID, []bool{true, true, true}))
			}
			return nil
		}},
		{name: "summary during the transfer", react: func(a *fakeAgent, typ byte, p []byte) error {
			return wire.WriteFrame(a.toClient, wire.Summary, wire.EncodeJSON(wire.Totals{}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, unacked, err := runFake(t, []string{"a", "b"}, tc.react)
			t.Log(err)
			if !errors.Is(err, wire.ErrProtocol) {
				t.Errorf("Run: %v, want a protocol error", err)
			}
			if fmt.Sprint(done) != fmt.Sprint(tc.wantDone) {
				t.Errorf("batches reported done: %v, want %v", done, tc.wantDone)
			}
			// Every batch handed to Run and not done is returned, for
			// another stream to carry (or was never taken from in).
			for _, id := range ids(unacked) {
				for _, d := range done {
					if d == id {
						t.Errorf("batch %d both done and unacked", id)
					}
				}
			}
		})
	}
}

// The agent reports a fatal error: Run returns it as a RemoteError.
func TestClientRemoteFail(t *testing.T) {
	defer goleak.VerifyNone(t)
	done, unacked, err := runFake(t, []string{"a"}, func(a *fakeAgent, typ byte, p []byte) error {
		return wire.WriteFrame(a.toClient, wire.Fail, []byte("disk on fire"))
	})
	var re *send.RemoteError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("Run: %v, want the agent's error", err)
	}
	if len(done) != 0 || len(unacked) != 1 {
		t.Errorf("done %v unacked %v", done, ids(unacked))
	}
}

// The real client against the real agent, over pipes, with goleak: the
// harness of the tests above against the real thing.
func TestClientAgent(t *testing.T) {
	defer goleak.VerifyNone(t)
	src, batches := srcTree(t, "a", "b", "c", "d", "e")
	root := filepath.Join(t.TempDir(), "dst")
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := receive.Serve(context.Background(), c2aR, a2cW, root, "test-agent")
		c2aR.Close()
		a2cW.Close()
		served <- err
	}()
	closer := closerFunc(func() error { c2aW.Close(); a2cR.Close(); return nil })
	c, err := send.Dial(context.Background(), "local", a2cR, c2aW, closer, "test-sender", wire.ReceiveOptions{}, src)
	if err != nil {
		t.Fatal(err)
	}
	// The agent names DEST itself, for the sender's journal.
	if fi, err := os.Stat(root); err != nil {
		t.Fatal(err)
	} else if ino := fmt.Sprintf(" ino=%d", fi.Sys().(*syscall.Stat_t).Ino); !strings.Contains(c.Peer.DestID+" ", ino+" ") {
		t.Errorf("the agent names DEST %q, want its inode (%s)", c.Peer.DestID, ino)
	}
	in := make(chan *model.Batch, len(batches))
	for _, b := range batches {
		in <- b
	}
	close(in)
	var done []uint64
	unacked, err := c.Run(context.Background(), in, func(r send.Result) { done = append(done, r.Batch.ID) })
	if err != nil || len(unacked) != 0 {
		t.Fatalf("Run: %v, unacked %v", err, ids(unacked))
	}
	if fmt.Sprint(done) != "[1 2 3 4 5]" {
		t.Errorf("done %v", done)
	}
	tot, err := c.Close(context.Background())
	if err != nil || tot.Files != 5 {
		t.Errorf("Close: %+v %v", tot, err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if b, err := os.ReadFile(filepath.Join(root, n)); err != nil || string(b) != "content of "+n {
			t.Errorf("%s: %q %v", n, b, err)
		}
	}
	noTemps(t, root)
}

// TestReceiverCPUIsTheJobs: an agent that served other jobs before (one
// that lingers) reports the CPU time of this job's receiver, not of its
// whole life, or the sender's verdict would see a receiver busy at
// several hundred percent.
func TestReceiverCPUIsTheJobs(t *testing.T) {
	ctx := context.Background()
	src, dst := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for x := 0; time.Since(before) < 400*time.Millisecond; x++ { // the earlier jobs' work
		_ = x * x
	}
	conn := pipeAgent(t, ctx, "s0", dst, source.Source{Root: src})
	pool, col := move(t, ctx, src, []send.Conn{conn}, sharder.Options{}, nil)
	if errs := col.errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	got := time.Duration(pool.Counters[0].RecvCPUNanos.Load())
	if got <= 0 || got > 200*time.Millisecond {
		t.Errorf("receiver CPU %v for a one-file job in a process that had used 400ms: want the job's alone", got)
	}
}

// A job of many batches on two streams of one hub, within a budget that
// holds a few of them at a time: every batch gives back what its manifest
// held (once committed, skipped, verified or applied), so a long job is
// never refused, and the hub holds nothing once its streams end.
func TestHubManifestMemoryGivenBack(t *testing.T) {
	defer goleak.VerifyNone(t)
	var names []string
	for i := range 120 {
		names = append(names, fmt.Sprintf("file%03d", i))
	}
	src, batches := srcTree(t, names...)
	root := filepath.Join(t.TempDir(), "dst")
	// A batch of one entry holds about 200 bytes: 8 KiB is a few dozen,
	// and what a batch kept would use it up within the job.
	shared := &receive.MemoryBudget{Limit: 1 << 20}
	hub := &receive.Hub{Root: root, Version: "test-agent", ManifestMemory: 8 << 10, Shared: shared}
	var wg sync.WaitGroup
	for s := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c2aR, c2aW := io.Pipe()
			a2cR, a2cW := io.Pipe()
			served := make(chan error, 1)
			go func() {
				err := hub.Serve(context.Background(), c2aR, a2cW)
				c2aR.Close()
				a2cW.Close()
				served <- err
			}()
			closer := closerFunc(func() error { c2aW.Close(); a2cR.Close(); return nil })
			c, err := send.Dial(context.Background(), fmt.Sprint("stream ", s), a2cR, c2aW, closer, "test-sender", wire.ReceiveOptions{}, src)
			if err != nil {
				t.Error(err)
				return
			}
			defer func() {
				if _, err := c.Close(context.Background()); err != nil {
					t.Errorf("stream %d: Close: %v", s, err)
				}
				if err := <-served; err != nil {
					t.Errorf("stream %d: Serve: %v", s, err)
				}
			}()
			// Written, then found in place twice (committed after an empty
			// need list, then at once), then verified, then the root's
			// metadata applied.
			for pass := range 2 {
				in := make(chan *model.Batch, len(batches))
				for i, b := range batches {
					if i%2 == s {
						in <- &model.Batch{ID: uint64(1000*pass + i + 1), Entries: b.Entries, Bytes: b.Bytes}
					}
				}
				close(in)
				if unacked, err := c.Run(context.Background(), in, func(send.Result) {}); err != nil || len(unacked) != 0 {
					t.Errorf("stream %d pass %d: Run: %v, %d unacked", s, pass, err, len(unacked))
					return
				}
			}
			// One batch at a time: each found in place with nothing ahead
			// of it, committed at once (Skipped).
			for i, b := range batches {
				if i%2 != s {
					continue
				}
				in := make(chan *model.Batch, 1)
				in <- &model.Batch{ID: uint64(2000 + i), Entries: b.Entries, Bytes: b.Bytes}
				close(in)
				var skipped bool
				if _, err := c.Run(context.Background(), in, func(r send.Result) { skipped = r.Ack != nil && r.Ack.Skipped == 1 }); err != nil || !skipped {
					t.Errorf("stream %d: batch %d alone: %v, skipped %v", s, i, err, skipped)
					return
				}
			}
			in := make(chan *model.Batch, len(batches))
			for i, b := range batches {
				if i%2 == s {
					in <- &model.Batch{ID: uint64(3000 + i), Entries: b.Entries}
				}
			}
			close(in)
			if err := c.Verify(context.Background(), in, false, func(send.Result) {}); err != nil {
				t.Errorf("stream %d: Verify: %v", s, err)
				return
			}
			root := model.Entry{Path: ".", Kind: model.KindDir, Mode: 0o755}
			if err := c.Final(context.Background(), []*model.Batch{{ID: uint64(4000 + s), Entries: []model.Entry{root}}}, func(send.Result) {}); err != nil {
				t.Errorf("stream %d: Final: %v", s, err)
			}
		}()
	}
	wg.Wait()
	if n := hub.ManifestHeld(); n != 0 || shared.Held() != 0 {
		t.Errorf("the hub holds %d bytes of manifests after its streams ended, the shared budget %d", n, shared.Held())
	}
	if _, err := os.Stat(filepath.Join(root, names[len(names)-1])); err != nil {
		t.Error(err)
	}
}
