package receive_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

type rframe struct {
	typ byte
	p   []byte
}

// agentUnderTest is receive.Serve on a pair of pipes, fed hand-written
// frames.
type agentUnderTest struct {
	t      *testing.T
	root   string
	in     *io.PipeWriter
	out    chan rframe
	served chan struct{}
	err    error
}

func startServe(t *testing.T, root string) *agentUnderTest {
	t.Helper()
	return startHub(t, &receive.Hub{Root: root, Version: "test-agent"})
}

// startHub serves one session of hub (receive.Serve is one with the zero
// Policy) to the test, which plays the sender.
func startHub(t *testing.T, hub *receive.Hub) *agentUnderTest {
	t.Helper()
	root := hub.Root
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &agentUnderTest{t: t, root: root, in: inW, out: make(chan rframe, 64), served: make(chan struct{})}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(a.out)
		br := bufio.NewReader(outR)
		for {
			typ, p, err := wire.ReadFrame(br)
			if err != nil {
				outR.CloseWithError(err)
				return
			}
			a.out <- rframe{typ, p}
		}
	}()
	go func() {
		defer close(a.served)
		a.err = hub.Serve(context.Background(), inR, outW)
		inR.CloseWithError(errors.New("the agent has returned"))
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		<-a.served
		<-readerDone
	})
	return a
}

func (a *agentUnderTest) send(typ byte, p []byte) {
	// An error means the agent is gone; wait() tells why.
	wire.WriteFrame(a.in, typ, p)
}

func (a *agentUnderTest) sendRaw(b []byte) { a.in.Write(b) }

func (a *agentUnderTest) cut() { a.in.CloseWithError(io.ErrUnexpectedEOF) }

func (a *agentUnderTest) expect(typ byte) rframe {
	a.t.Helper()
	select {
	case f, ok := <-a.out:
		if !ok {
			a.t.Fatalf("agent closed its output, want frame %q", typ)
		}
		if f.typ != typ {
			a.t.Fatalf("agent sent frame %q (%q), want %q", f.typ, f.p, typ)
		}
		return f
	case <-time.After(10 * time.Second):
		a.t.Fatalf("no frame %q from the agent", typ)
	}
	return rframe{}
}

// wait returns Serve's error.
func (a *agentUnderTest) wait() error {
	a.t.Helper()
	select {
	case <-a.served:
		return a.err
	case <-time.After(10 * time.Second):
		a.t.Fatal("Serve did not return")
	}
	return nil
}

func (a *agentUnderTest) handshake() wire.Handshake {
	a.t.Helper()
	a.send(wire.Hello, wire.EncodeJSON(wire.Handshake{Proto: wire.Proto, Version: "test-sender"}))
	var h wire.Handshake
	if err := wire.DecodeJSON(a.expect(wire.Hello).p, &h); err != nil {
		a.t.Fatal(err)
	}
	return h
}

// manifest sends a manifest and returns the agent's need list.
func (a *agentUnderTest) manifest(m *wire.BatchManifest) []bool {
	a.t.Helper()
	a.send(wire.Manifest, wire.EncodeManifest(m))
	id, need, err := wire.DecodeNeed(a.expect(wire.Need).p)
	if err != nil || id != m.ID || len(need) != len(m.Entries) {
		a.t.Fatalf("need for batch %d: id %d, %d entries, %v", m.ID, id, len(need), err)
	}
	return need
}

// failed expects a Fail frame and Serve's error, and returns the error.
func (a *agentUnderTest) failed() error {
	a.t.Helper()
	f := a.expect(wire.Fail)
	err := a.wait()
	if err == nil {
		a.t.Fatalf("Serve returned nil after sending Fail %q", f.p)
	}
	msg := err.Error()
	var refused *wire.RefusedError
	if errors.As(err, &refused) { // at the handshake: the frame is the reason
		msg = refused.Reason
	}
	if string(f.p) != msg {
		a.t.Errorf("Fail frame %q, Serve returned %q", f.p, err)
	}
	return err
}

var mtime = time.Date(2022, 1, 2, 3, 4, 5, 600700800, time.UTC).UnixNano()

func fileEntry(p string, size int64) model.Entry {
	return model.Entry{Path: p, Kind: model.KindFile, Mode: 0o644, Size: size, MTime: mtime, Nlink: 1}
}

type tarFile struct {
	name string
	data []byte
}

// tarStream is a batch's data as the sender writes it; with cut >= 0 it
// is cut after that many bytes.
func tarStream(t *testing.T, id uint64, files []tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{wire.PAXBatch: strconv.FormatUint(id, 10)}})
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Size: int64(len(f.data)), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkClean asserts that no temporary file is left under root and none
// of names exists.
func checkClean(t *testing.T, root string, names ...string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), extract.TempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(root, n)); err == nil {
			t.Errorf("%s exists under its final name", n)
		}
	}
}

// A whole session: the harness itself works.
func TestServeBatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := filepath.Join(t.TempDir(), "dst")
	a := startServe(t, root)
	h := a.handshake()
	if h.Proto != wire.Proto || h.Version != "test-agent" || h.Root != root {
		t.Errorf("agent hello %+v", h)
	}
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileEntry("a", 3), fileEntry("d/b", 5)}}
	if need := a.manifest(m); !need[0] || !need[1] {
		t.Fatalf("need %v", need)
	}
	a.send(wire.Data, wire.EncodeID(1))
	a.sendRaw(tarStream(t, 1, []tarFile{{"a", []byte("abc")}, {"d/b", []byte("bbbbb")}}))
	a.send(wire.Commit, wire.EncodeCommit(1, nil))
	ack, err := wire.DecodeAck(a.expect(wire.Ack).p)
	if err != nil || ack.ID != 1 || ack.Files != 2 || ack.Bytes != 8 || len(ack.Errors) != 0 {
		t.Fatalf("ack %+v %v", ack, err)
	}
	// The same batch again: nothing needed, and no batch ahead of it, so
	// the agent commits it at once: Skipped, then its ack, no data.
	m.ID = 2
	a.send(wire.Manifest, wire.EncodeManifest(m))
	if id, err := wire.DecodeID(a.expect(wire.Skipped).p); err != nil || id != 2 {
		t.Fatalf("skipped %d %v, want batch 2", id, err)
	}
	if ack, _ := wire.DecodeAck(a.expect(wire.Ack).p); ack.ID != 2 || ack.Skipped != 2 {
		t.Errorf("ack %+v, want batch 2 with 2 skipped", ack)
	}
	a.send(wire.End, nil)
	var tot wire.Totals
	if err := wire.DecodeJSON(a.expect(wire.Summary).p, &tot); err != nil || tot.Files != 2 || tot.Skipped != 2 {
		t.Errorf("summary %+v %v", tot, err)
	}
	if err := a.wait(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "d/b")); err != nil || string(b) != "bbbbb" {
		t.Errorf("d/b: %q %v", b, err)
	}
	checkClean(t, root)
}

// A sender of another protocol version gets the agent's hello, so that it
// can name both versions, and the agent's error names both too.
func TestServeVersionMismatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := filepath.Join(t.TempDir(), "dst")
	a := startServe(t, root)
	a.send(wire.Hello, wire.EncodeJSON(wire.Handshake{Proto: 99, Version: "9.9.9"}))
	var h wire.Handshake
	if err := wire.DecodeJSON(a.expect(wire.Hello).p, &h); err != nil {
		t.Fatal(err)
	}
	if h.Proto != wire.Proto || h.Version != "test-agent" {
		t.Errorf("agent hello %+v", h)
	}
	err := a.wait()
	if err == nil || !errors.Is(err, wire.ErrVersion) {
		t.Fatalf("Serve: %v, want wire.ErrVersion", err)
	}
	for _, s := range []string{"99", "9.9.9", "test-agent", fmt.Sprintf("speaks %d", wire.Proto)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if _, err := os.Lstat(root); err == nil {
		t.Errorf("the agent created its root for a sender it refused")
	}
}

// Something that is not bulkmove: a shell banner, a wrong first frame, a
// bad hello.
func TestServeGarbage(t *testing.T) {
	defer goleak.VerifyNone(t)
	t.Run("banner", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.sendRaw([]byte("Welcome to box2\nLast login: yesterday\n"))
		err := a.wait()
		if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "Welco") {
			t.Errorf("Serve: %v, want a protocol error quoting the bytes", err)
		}
	})
	t.Run("empty", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.in.Close()
		if err := a.wait(); err == nil {
			t.Errorf("Serve: nil on an empty connection")
		}
	})
	t.Run("manifest first", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.send(wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: 1}))
		if err := a.failed(); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("Serve: %v, want a protocol error", err)
		}
	})
	t.Run("bad hello", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.send(wire.Hello, []byte("{not json"))
		if err := a.failed(); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("Serve: %v, want a protocol error", err)
		}
	})
	t.Run("huge frame", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.handshake()
		a.sendRaw([]byte{wire.Manifest, 0xff, 0xff, 0xff, 0xff})
		if err := a.failed(); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("Serve: %v, want a protocol error", err)
		}
	})
}

// Frames out of order: data for a batch never manifested, or not the
// next one; a commit without data; an end with a batch open.
func TestServeOutOfOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	t.Run("data never manifested", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.handshake()
		a.send(wire.Data, wire.EncodeID(5))
		err := a.failed()
		if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "batch #5") {
			t.Errorf("Serve: %v, want a protocol error naming batch 5", err)
		}
	})
	t.Run("data for the second batch first", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.handshake()
		a.manifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{fileEntry("a", 1)}})
		a.manifest(&wire.BatchManifest{ID: 2, Entries: []model.Entry{fileEntry("b", 1)}})
		a.send(wire.Data, wire.EncodeID(2))
		if err := a.failed(); !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "batch #2") {
			t.Errorf("Serve: %v, want a protocol error naming batch 2", err)
		}
	})
	t.Run("commit without data", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.handshake()
		a.manifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{fileEntry("a", 1)}})
		a.send(wire.Commit, wire.EncodeCommit(1, nil))
		if err := a.failed(); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("Serve: %v, want a protocol error", err)
		}
	})
	t.Run("ack from the sender", func(t *testing.T) {
		a := startServe(t, filepath.Join(t.TempDir(), "dst"))
		a.handshake()
		a.send(wire.Ack, wire.EncodeAck(&wire.BatchAck{ID: 1}))
		if err := a.failed(); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("Serve: %v, want a protocol error", err)
		}
	})
}

// More manifests ahead of their data than the agent holds: Fail.
func TestServeTooManyManifests(t *testing.T) {
	defer goleak.VerifyNone(t)
	a := startServe(t, filepath.Join(t.TempDir(), "dst"))
	a.handshake()
	max := 2 * wire.Window
	for i := 1; i <= max; i++ {
		a.manifest(&wire.BatchManifest{ID: uint64(i), Entries: []model.Entry{fileEntry(fmt.Sprint("f", i), 1)}})
	}
	a.send(wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: uint64(max + 1)}))
	err := a.failed()
	if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "manifests ahead") {
		t.Errorf("Serve: %v, want a protocol error about manifests ahead", err)
	}
}

// The connection is cut, or the sender breaks the protocol, while a batch
// is open: an error, no temporary file left, nothing under a final name.
func TestServeCut(t *testing.T) {
	defer goleak.VerifyNone(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	files := []tarFile{{"small", []byte("abc")}, {"d/big", big}, {"last", []byte("z")}}
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileEntry("small", 3), fileEntry("d/big", int64(len(big))), fileEntry("last", 1)}}
	full := tarStream(t, 1, files)

	for _, tc := range []struct {
		name string
		then func(t *testing.T, a *agentUnderTest)
		// wantFail: the agent reports the error in a Fail frame.
		wantFail bool
		want     string
	}{
		{name: "mid-tar", wantFail: true, want: "d/big", then: func(t *testing.T, a *agentUnderTest) {
			a.sendRaw(full[:len(full)/2])
			a.cut()
		}},
		{name: "mid-header", wantFail: true, then: func(t *testing.T, a *agentUnderTest) {
			a.sendRaw(full[:512*3+100])
			a.cut()
		}},
		{name: "after the tar", then: func(t *testing.T, a *agentUnderTest) {
			a.sendRaw(full)
			a.cut()
		}},
		{name: "mid-commit frame", wantFail: true, then: func(t *testing.T, a *agentUnderTest) {
			a.sendRaw(full)
			a.sendRaw([]byte{wire.Commit, 0, 0})
			a.cut()
		}},
		{name: "bad frame after the tar", wantFail: true, then: func(t *testing.T, a *agentUnderTest) {
			a.sendRaw(full)
			a.send(wire.Manifest, []byte{1})
		}},
		{name: "second data frame", wantFail: true, then: func(t *testing.T, a *agentUnderTest) {
			a.sendRaw(full)
			a.send(wire.Data, wire.EncodeID(1))
		}},
		{name: "end with the batch open", wantFail: true, then: func(t *testing.T, a *agentUnderTest) {
			a.sendRaw(full)
			a.send(wire.End, nil)
		}},
		{name: "commit of another batch", wantFail: true, then: func(t *testing.T, a *agentUnderTest) {
			a.sendRaw(full)
			a.send(wire.Commit, wire.EncodeCommit(7, nil))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "dst")
			a := startServe(t, root)
			a.handshake()
			a.manifest(m)
			a.send(wire.Data, wire.EncodeID(1))
			tc.then(t, a)
			var err error
			if tc.wantFail {
				err = a.failed()
			} else {
				err = a.wait()
			}
			if err == nil {
				t.Fatal("Serve: nil")
			}
			t.Log(err)
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
			checkClean(t, root, "small", "d/big", "last")
		})
	}
}
