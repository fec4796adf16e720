package receive_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/wire"
)

// Attacks on the receiver's memory by a sender that has passed the
// handshake (a job's token holder on serve, any process that reaches an
// agent's stdin).

// A sender declares a manifest frame of 64 MiB, sends ten bytes of it and
// stalls: the agent holds what arrived, not what was declared.
func TestAttackFrameDeclaredNotSent(t *testing.T) {
	a := startServe(t, filepath.Join(t.TempDir(), "dst"))
	a.handshake()
	before := totalAlloc()
	var h [5]byte
	h[0] = wire.Manifest
	binary.BigEndian.PutUint32(h[1:], wire.MaxFrame)
	a.sendRaw(append(h[:], "0123456789"...)) // returns once the agent has read it
	// The agent now waits for the rest; give it time to allocate whatever
	// it allocates for the frame.
	var grown uint64
	for range 20 {
		time.Sleep(25 * time.Millisecond)
		if grown = totalAlloc() - before; grown > 8<<20 {
			break
		}
	}
	if grown > 8<<20 {
		t.Fatalf("the agent allocated %d MiB for a frame that declared %d MiB and sent 10 bytes, want under 8 MiB",
			grown>>20, wire.MaxFrame>>20)
	}
	a.cut()
	if err := a.wait(); err == nil {
		t.Error("Serve returned nil for a frame cut short")
	}
}

// A sender pushes manifests of a million entries each (about 18 MB on the
// wire, over 100 MiB decoded), with no data after them: the agent refuses
// the one that would pass the job's budget for manifests, with an error
// naming the limit, and its heap stays under the budget (plus the frames
// in flight and the test's own buffers).
func TestAttackPendingManifests(t *testing.T) {
	a := startServe(t, filepath.Join(t.TempDir(), "dst"))
	a.handshake()
	// A batch of deferred entries is queued as it comes (no need list to
	// wait for); an empty verify batch after it is answered once the agent
	// has taken the manifest before it.
	entries := make([]model.Entry, wire.MaxEntries)
	for i := range entries {
		entries[i] = model.Entry{Path: fmt.Sprintf("f%07d", i), Kind: model.KindFile, Mode: 0o644, Nlink: 1}
	}
	p := wire.EncodeManifest(&wire.BatchManifest{ID: 1, Flags: wire.FlagFinal, Entries: entries})
	entries = nil
	if p[0] != 1 {
		t.Fatalf("the manifest does not start with its one-byte id: %x", p[:8])
	}
	base := heapAlloc()
	const slack = 64 << 20
	limit := uint64(receive.DefaultManifestMemory + slack)
	for id := byte(1); id <= 2*wire.Window; id++ {
		p[0] = id // the batch id, a one-byte uvarint
		a.send(wire.Manifest, p)
		a.send(wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: 100 + uint64(id), Flags: wire.FlagVerify}))
		f := a.next()
		if f.typ == wire.Fail {
			err := a.wait()
			msg := err.Error()
			if !errors.Is(err, wire.ErrLimit) || !strings.Contains(msg, "256 MiB") || !strings.Contains(msg, "manifests not yet committed") {
				t.Fatalf("manifest %d refused with %v, want an error naming the job's limit of 256 MiB for manifests", id, err)
			}
			if id < 2 {
				t.Errorf("the first manifest was refused: %v", err)
			}
			t.Logf("manifest %d refused: %v", id, err)
			return
		}
		if f.typ != wire.Ack {
			t.Fatalf("agent sent frame %q, want an ack or a refusal", f.typ)
		}
		if grown := int64(heapAlloc()) - int64(base); grown > int64(limit) {
			t.Fatalf("heap grew by %d MiB with %d manifests of %d entries pending, want at most %d MiB (the job's budget and %d MiB)",
				grown>>20, id, wire.MaxEntries, limit>>20, slack>>20)
		}
	}
	t.Fatalf("%d manifests of %d entries pending were all taken", 2*wire.Window, wire.MaxEntries)
}

// next returns the agent's next frame.
func (a *agentUnderTest) next() rframe {
	a.t.Helper()
	select {
	case f, ok := <-a.out:
		if !ok {
			a.t.Fatal("agent closed its output")
		}
		return f
	case <-time.After(30 * time.Second):
		a.t.Fatal("no frame from the agent")
	}
	return rframe{}
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The jobs of one receiver (serve's) share a budget besides their own: a
// job's manifest that would pass it is refused, naming it, while another
// job holds its share; frames that carry lists (a commit, a prune) count
// while they are read; all of it is given back when the sessions end.
func TestHubSharedBudget(t *testing.T) {
	shared := &receive.MemoryBudget{Limit: 64 << 10}
	dir := t.TempDir()
	hubA := &receive.Hub{Root: filepath.Join(dir, "a"), Version: "test-agent", Shared: shared}
	hubB := &receive.Hub{Root: filepath.Join(dir, "b"), Version: "test-agent", Shared: shared}
	final := func(id uint64, n int) []byte {
		var es []model.Entry
		for i := range n {
			es = append(es, model.Entry{Path: fmt.Sprintf("d%d/%04d", id, i), Kind: model.KindDir, Mode: 0o755})
		}
		return wire.EncodeManifest(&wire.BatchManifest{ID: id, Flags: wire.FlagFinal, Entries: es})
	}
	verified := func(a *agentUnderTest, id uint64) {
		t.Helper()
		a.send(wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: id, Flags: wire.FlagVerify}))
		a.expect(wire.Ack)
	}
	// Job A: two batches of 200 entries pending, about 45 KiB.
	a := startHub(t, hubA)
	a.handshake()
	a.send(wire.Manifest, final(1, 200))
	a.send(wire.Manifest, final(2, 200))
	verified(a, 100)
	if held := shared.Held(); held < 40<<10 || held > 64<<10 {
		t.Fatalf("two manifests of 200 entries hold %d bytes of the shared budget", held)
	}
	// Job B: a third such batch passes the shared budget.
	b := startHub(t, hubB)
	b.handshake()
	b.send(wire.Manifest, final(3, 200))
	err := b.failed()
	if !errors.Is(err, wire.ErrLimit) || !strings.Contains(err.Error(), "for all its jobs") || !strings.Contains(err.Error(), "jobs 64 KiB") {
		t.Errorf("job B's manifest past the shared budget: %v, want a refusal naming the receiver's limit across jobs", err)
	}
	// A commit frame declared past what is left is refused at its header.
	var h [5]byte
	h[0] = wire.Commit
	binary.BigEndian.PutUint32(h[1:], 32<<10)
	a.sendRaw(h[:])
	if err := a.failed(); !errors.Is(err, wire.ErrLimit) || !strings.Contains(err.Error(), `a 'C' frame of 32768 bytes`) {
		t.Errorf("a commit frame past the budget: %v, want a refusal naming it", err)
	}
	if held := shared.Held(); held != 0 {
		t.Errorf("the shared budget holds %d bytes after its jobs' sessions ended", held)
	}
}

// TestHubManyStreamsDefaultBudget: a job of many streams, each holding no
// more than a stream of default batches with long paths does, is not
// refused for passing DefaultManifestMemory together: the default budget
// grows by StreamManifestMemory a stream.
func TestHubManyStreamsDefaultBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("hundreds of MiB of manifests under the race detector")
	}
	const streams = 96
	var es []model.Entry
	for i := 0; ; i++ {
		es = append(es, model.Entry{Path: fmt.Sprintf("d/%06d", i), Kind: model.KindDir, Mode: 0o755})
		if i%1024 == 0 && wire.ManifestCost(&wire.BatchManifest{Entries: es})+int64(len(es)) > 3<<20+512<<10 {
			break
		}
	}
	p := wire.EncodeManifest(&wire.BatchManifest{ID: 1, Flags: wire.FlagFinal, Entries: es})
	if p[0] != 1 {
		t.Fatalf("the manifest does not start with its one-byte id: %x", p[:8])
	}
	hub := &receive.Hub{Root: filepath.Join(t.TempDir(), "dst"), Version: "test-agent"}
	for i := range streams {
		a := startHub(t, hub)
		a.handshake()
		q := bytes.Clone(p)
		q[0] = byte(1 + i)
		a.send(wire.Manifest, q)
		a.send(wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: uint64(100 + i), Flags: wire.FlagVerify}))
		a.expect(wire.Ack)
	}
	if held := hub.ManifestHeld(); held <= receive.DefaultManifestMemory {
		t.Fatalf("%d streams hold %d bytes of manifests, want more than the default %d for the test to mean anything", streams, held, receive.DefaultManifestMemory)
	}
}
