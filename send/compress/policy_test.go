package compress

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// TestAutoPolicy walks auto mode through a job whose link is slow, then
// fast: on once writes block and a sample compresses, on while the link
// stays the bottleneck, plain probes ever rarer while it is CPU-bound, off
// once a probe shows that the link takes plain data faster than it can be
// compressed; never on for data that does not compress, nor while the
// receiver is what the writes wait for.
func TestAutoPolicy(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("GET /index.html 200 0.003s user=42 cache=hit\n", 2000)
	os.WriteFile(filepath.Join(dir, "text"), []byte(text), 0o644)
	random := xorshift(90000, 1)
	os.WriteFile(filepath.Join(dir, "random"), random, 0o644)
	batch := func(name string, size int) (*wire.BatchManifest, []bool) {
		return &wire.BatchManifest{Entries: []model.Entry{{Path: name, Kind: model.KindFile, Size: int64(size)}}}, []bool{true}
	}
	src := source.Source{Root: dir}
	var log strings.Builder
	d := &Stream{cfg: Config{Mode: Auto}, name: "s0", logf: func(f string, a ...any) {
		log.WriteString(strings.TrimSpace(strings.ReplaceAll(f, "%", "")) + "\n")
	}}
	const mib = 1 << 20
	text16, need := batch("text", len(text))
	rnd, needR := batch("random", len(random))

	// A plain batch on a link that keeps up: nothing to sample.
	d.Observe(wire.CodecNone, 16*mib, 16*mib, 100*time.Millisecond, time.Millisecond, 0, 0)
	if c := d.Codec(src, text16, need); c != wire.CodecNone {
		t.Fatalf("fast link: codec %d", c)
	}
	// Writes block 90% of the time: a slow link.
	d.Observe(wire.CodecNone, 16*mib, 16*mib, time.Second, 900*time.Millisecond, 0, 0)
	if c := d.Codec(src, rnd, needR); c != wire.CodecNone || d.auto.on {
		t.Fatalf("random data on a slow link: codec %d, on %v", c, d.auto.on)
	}
	// ... unless a receiver busy writing is why they block.
	d.Observe(wire.CodecNone, 16*mib, 16*mib, time.Second, 900*time.Millisecond, 0.9, 0)
	if c := d.Codec(src, text16, need); c != wire.CodecNone {
		t.Fatalf("busy receiver: codec %d", c)
	}
	d.Observe(wire.CodecNone, 16*mib, 16*mib, time.Second, 900*time.Millisecond, 0.1, 1.0)
	if c := d.Codec(src, text16, need); c != wire.CodecNone {
		t.Fatalf("receiver using a core: codec %d", c)
	}
	// (A very slow link, so that the sample's cost, timed for real, is
	// small beside it even on a busy machine under -race.)
	d.Observe(wire.CodecNone, 16*mib, 16*mib, 20*time.Second, 19900*time.Millisecond, 0, 0)
	if c := d.Codec(src, text16, need); c != wire.CodecZstd || !d.auto.on {
		t.Fatalf("text on a slow link: codec %d, on %v", c, d.auto.on)
	}
	if !strings.Contains(log.String(), "compression on") {
		t.Errorf("log %q", log.String())
	}
	// Compressed, still link-bound: stays on, no probe.
	for range 20 {
		d.Observe(wire.CodecZstd, 16*mib, 2*mib, 150*time.Millisecond, 120*time.Millisecond, 0, 0)
		if c := d.Codec(src, text16, need); c != wire.CodecZstd {
			t.Fatalf("link-bound compressed: codec %d", c)
		}
	}
	// Random data in between goes plain, without turning compression off.
	if c := d.Codec(src, rnd, needR); c != wire.CodecNone || !d.auto.on {
		t.Fatalf("random batch: codec %d, on %v", c, d.auto.on)
	}
	// The link gets fast: compressed batches are CPU-bound, a probe
	// comes after firstProbe of them.
	n := 0
	for d.Codec(src, text16, need) == wire.CodecZstd {
		d.Observe(wire.CodecZstd, 16*mib, 2*mib, 100*time.Millisecond, 0, 0, 0)
		if n++; n > firstProbe+1 {
			t.Fatal("no probe")
		}
	}
	if !d.auto.probe {
		t.Fatal("plain batch that is not a probe")
	}
	// The probe goes fast: off.
	d.Observe(wire.CodecNone, 16*mib, 16*mib, 20*time.Millisecond, 0, 0, 0)
	if d.auto.on || d.Codec(src, text16, need) != wire.CodecNone {
		t.Fatalf("still on after a fast probe: %+v", d.auto)
	}
	if !strings.Contains(log.String(), "compression off") {
		t.Errorf("log %q", log.String())
	}
	d.close()
}

func TestParseCompression(t *testing.T) {
	for in, want := range map[string]string{"none": "none", "auto": "auto", "zstd": "zstd", "zstd:3": "zstd:3", "zstd:22": "zstd:22"} {
		c, err := Parse(in)
		if err != nil || c.String() != want {
			t.Errorf("%q: %v %v", in, c, err)
		}
	}
	for _, in := range []string{"", "gzip", "zstd:0", "zstd:23", "zstd:x", "auto:1", "none:3"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestSampleSpread: the sample of a batch spans its files, so a batch of
// text led by a random blob still compresses (its first 64 KiB alone are
// random).
func TestSampleSpread(t *testing.T) {
	dir := t.TempDir()
	random := xorshift(200000, 3)
	os.WriteFile(filepath.Join(dir, "blob.bin"), random, 0o644)
	m := &wire.BatchManifest{Entries: []model.Entry{{Path: "blob.bin", Kind: model.KindFile, Size: int64(len(random))}}}
	for i := range 9 {
		name := fmt.Sprintf("log-%d.txt", i)
		text := strings.Repeat(fmt.Sprintf("GET /item/%d 200 user=%d\n", i, i*7), 2000)
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
		m.Entries = append(m.Entries, model.Entry{Path: name, Kind: model.KindFile, Size: int64(len(text))})
	}
	need := make([]bool, len(m.Entries))
	for i := range need {
		need[i] = true
	}
	d := &Stream{cfg: Config{Mode: Auto}}
	defer func() {
		d.close()
	}()
	ratio, _, ok := d.trySample(source.Source{Root: dir}, m, need)
	if !ok || ratio > 0.5 {
		t.Errorf("sample of a text batch led by a blob: ratio %.2f (ok %v), want it to compress", ratio, ok)
	}
	if len(d.sample) != 0 || cap(d.sample) < sampleBytes {
		t.Errorf("sample buffer not kept for reuse")
	}
}

// TestAutoLevel: auto compresses text at the fastest level, numbers
// without near repeats (which the fastest level leaves whole) at the
// default one, and everything at the default one while the link holds
// every write back.
func TestAutoLevel(t *testing.T) {
	dir := t.TempDir()
	var seq strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&seq, "%d\n", i*7919%1000003)
	}
	os.WriteFile(filepath.Join(dir, "seq"), []byte(seq.String()), 0o644)
	var logs strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&logs, "2024-01-02T03:04:%02d INFO [worker-%d] request handled path=/api/v1/items status=200\n", i%60, i%8)
	}
	os.WriteFile(filepath.Join(dir, "log"), []byte(logs.String()), 0o644)
	src := source.Source{Root: dir}
	batch := func(name string, size int) (*wire.BatchManifest, []bool) {
		return &wire.BatchManifest{Entries: []model.Entry{{Path: name, Kind: model.KindFile, Size: int64(size)}}}, []bool{true}
	}
	d := &Stream{cfg: Config{Mode: Auto}}
	defer d.close()
	for _, c := range []struct {
		name    string
		size    int
		blocked float64
		want    int
	}{
		{"log", logs.Len(), 0, autoFastest},
		{"seq", seq.Len(), 0, autoDefault},
		{"log", logs.Len(), 0.99, autoDefault},
	} {
		d.auto.slowLink = c.blocked > 0.25
		m, need := batch(c.name, c.size)
		if _, _, ok := d.trySample(src, m, need); !ok || d.level != c.want {
			t.Errorf("%s, writes blocked %.0f%%: level %d (ok %v), want %d", c.name, 100*c.blocked, d.level, ok, c.want)
		}
	}
}

// TestAutoPolicyBusyHost: on a slow-looking link, compression does not
// start while this host's CPUs are busy (two hosts sharing two cores look
// like a slow link whose far end is starved of CPU).
func TestAutoPolicyBusyHost(t *testing.T) {
	src, m, need := textBatch(t)
	d := &Stream{cfg: Config{Mode: Auto}}
	defer d.close()
	const mib = 1 << 20
	d.Observe(wire.CodecNone, 16*mib, 16*mib, 20*time.Second, 19900*time.Millisecond, 0, 0)
	d.auto.cpuBusy = true
	if c := d.Codec(src, m, need); c != wire.CodecNone || d.auto.on {
		t.Fatalf("busy host: codec %d, on %v", c, d.auto.on)
	}
	d.auto.cpuBusy = false
	if c := d.Codec(src, m, need); c != wire.CodecZstd || !d.auto.on {
		t.Fatalf("idle host: codec %d, on %v", c, d.auto.on)
	}
}

// xorshift returns n bytes that do not compress, from seed.
func xorshift(n int, seed uint32) []byte {
	b := make([]byte, n)
	x := seed
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// close releases d's encoders.
func (d *Stream) close() {
	for _, e := range append(d.levels[:], d.enc) {
		if e != nil {
			e.Close()
		}
	}
}

// TestAutoPolicyFarPath: over a far path a stream starts compressed when
// its first sample compresses well (its writes would block only seconds
// in); a near one, or data that does not compress, starts plain. With no
// measure of the link, compressing never counts as CPU-bound; a probe that
// the buffers take at once goes on until probeBytes have gone plain, and
// leaves compression on if the writes blocked over them.
func TestAutoPolicyFarPath(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("GET /index.html 200 0.003s user=42 cache=hit\n", 2000)
	os.WriteFile(filepath.Join(dir, "text"), []byte(text), 0o644)
	os.WriteFile(filepath.Join(dir, "random"), xorshift(90000, 1), 0o644)
	src := source.Source{Root: dir}
	batch := func(name string) (*wire.BatchManifest, []bool) {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return &wire.BatchManifest{Entries: []model.Entry{{Path: name, Kind: model.KindFile, Size: fi.Size()}}}, []bool{true}
	}
	tm, tn := batch("text")
	rm, rn := batch("random")
	var log strings.Builder
	newD := func(far bool) *Stream {
		d := &Stream{cfg: Config{Mode: Auto}, far: far, name: "s0", logf: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }}
		t.Cleanup(d.close)
		return d
	}
	if c := newD(false).Codec(src, tm, tn); c != wire.CodecNone {
		t.Errorf("near path, first batch: codec %d, want plain", c)
	}
	if c := newD(true).Codec(src, rm, rn); c != wire.CodecNone {
		t.Errorf("far path, random first batch: codec %d, want plain", c)
	}
	d := newD(true)
	if c := d.Codec(src, tm, tn); c != wire.CodecZstd || !d.auto.on {
		t.Fatalf("far path, text first batch: codec %d, on %v", c, d.auto.on)
	}
	if !strings.Contains(log.String(), "far path") {
		t.Errorf("log %q", log.String())
	}
	// Compressed batches that the buffers take at once: on until a probe.
	const mib = 1 << 20
	n := 0
	for d.Codec(src, tm, tn) == wire.CodecZstd {
		d.Observe(wire.CodecZstd, 16*mib, 7*mib, 100*time.Millisecond, 0, 0, 0)
		if n++; n > firstProbe+1 {
			t.Fatal("no probe")
		}
	}
	if !d.auto.on || !d.auto.probe {
		t.Fatalf("compression off before a probe: %+v\n%s", d.auto, log.String())
	}
	// The probe's first 4 MiB go at once: it goes on; the next 4 MiB wait
	// on the link most of the time: compression stays on.
	d.Observe(wire.CodecNone, 4*mib, 4*mib, 10*time.Millisecond, 0, 0, 0)
	if !d.auto.on || d.Codec(src, tm, tn) != wire.CodecNone {
		t.Fatalf("a probe ended after %d MiB: %+v", 4, d.auto)
	}
	d.Observe(wire.CodecNone, 4*mib, 4*mib, 400*time.Millisecond, 300*time.Millisecond, 0, 0)
	if !d.auto.on || d.Codec(src, tm, tn) != wire.CodecZstd {
		t.Fatalf("compression off after a probe whose writes blocked: %+v\n%s", d.auto, log.String())
	}
}

// TestCPUTimed: a sample's cost is the CPU it took, not the time it waited
// (on a busy machine, for a CPU).
func TestCPUTimed(t *testing.T) {
	took, out := cpuTimed(func() []byte { time.Sleep(50 * time.Millisecond); return []byte("x") })
	if took >= 25*time.Millisecond || string(out) != "x" {
		t.Errorf("a 50 ms sleep took %v of CPU, returned %q", took, out)
	}
	took, _ = cpuTimed(func() []byte {
		for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
		}
		return nil
	})
	if took <= 0 {
		t.Errorf("30 ms of spinning took %v of CPU", took)
	}
}

// TestAutoPolicyJoins: a stream that joins a job whose decision is to
// compress (one -j auto adds) starts compressed, far or near, and holds
// that decision; in a job that decided nothing yet, or decided to send
// plain, it starts plain, to measure the link itself.
func TestAutoPolicyJoins(t *testing.T) {
	src, m, need := textBatch(t)
	var share AutoShare
	var log strings.Builder
	newD := func() *Stream {
		d := &Stream{cfg: Config{Mode: Auto}, share: &share, name: "s", logf: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }}
		t.Cleanup(d.close)
		return d
	}
	const mib = 1 << 20
	first := newD()
	if c := newD().Codec(src, m, need); c != wire.CodecNone {
		t.Fatalf("a stream of a job that sent nothing yet: codec %d, want plain", c)
	}
	// The first stream's writes wait on the link: it compresses.
	first.Observe(wire.CodecNone, 16*mib, 16*mib, 20*time.Second, 19900*time.Millisecond, 0, 0)
	if c := first.Codec(src, m, need); c != wire.CodecZstd {
		t.Fatalf("first stream on a slow link: codec %d", c)
	}
	late := newD()
	if c := late.Codec(src, m, need); c != wire.CodecZstd || !late.auto.on {
		t.Fatalf("joined a job compressing on a slow link: codec %d, on %v", c, late.auto.on)
	}
	if !strings.Contains(log.String(), "other streams compress") {
		t.Errorf("log %q", log.String())
	}
	// It holds: a compressed batch that did not wait turns nothing off.
	late.Observe(wire.CodecZstd, 16*mib, 6*mib, 100*time.Millisecond, 0, 0, 0)
	if c := late.Codec(src, m, need); c != wire.CodecZstd {
		t.Fatalf("a joined stream after one batch the link took at once: codec %d", c)
	}
	far := newD()
	far.far = true
	if c := far.Codec(src, m, need); c != wire.CodecZstd {
		t.Fatalf("a far stream joining: codec %d", c)
	}
	// The job turns it off (a probe went as fast as the stream made it).
	first.turn(false)
	if c := newD().Codec(src, m, need); c != wire.CodecNone {
		t.Fatalf("joined a job that turned compression off: codec %d, want plain", c)
	}
}

// TestAutoPolicyHolds: a stream whose measures swing from batch to batch
// (writes that wait, then batches the buffers take at once; data that
// compresses, then data that does not) changes its mind a few times, not
// at every batch; and plain batches of data that does not compress do not
// turn compression off.
func TestAutoPolicyHolds(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("GET /index.html 200 0.003s user=42 cache=hit\n", 2000)
	os.WriteFile(filepath.Join(dir, "text"), []byte(text), 0o644)
	random := xorshift(90000, 1)
	os.WriteFile(filepath.Join(dir, "random"), random, 0o644)
	src := source.Source{Root: dir}
	tm := &wire.BatchManifest{Entries: []model.Entry{{Path: "text", Kind: model.KindFile, Size: int64(len(text))}}}
	rm := &wire.BatchManifest{Entries: []model.Entry{{Path: "random", Kind: model.KindFile, Size: int64(len(random))}}}
	need := []bool{true}
	d := &Stream{cfg: Config{Mode: Auto}}
	defer d.close()
	const mib = 1 << 20
	// 400 batches of 100 ms (40 s of the stream's time): every other one
	// waits on the link, every third is random data.
	for i := range 400 {
		m := tm
		if i%3 == 2 {
			m = rm
		}
		c := d.Codec(src, m, need)
		out, blocked := int64(16*mib), time.Duration(0)
		if c == wire.CodecZstd {
			out = 6 * mib
		}
		if i%2 == 0 {
			blocked = 95 * time.Millisecond
		}
		d.Observe(c, 16*mib, out, 100*time.Millisecond, blocked, 0, 0)
		if m == rm && c != wire.CodecNone {
			t.Fatalf("batch %d of random data went compressed", i)
		}
	}
	// Doubling dwells from minDwell: at most log2(40 s / 2 s) + 1 changes.
	onOff, levels := d.Flips()
	if onOff > 6 || levels > 6 {
		t.Errorf("over 40 s: compression turned on or off %d times, its level changed %d times; want at most 6 each", onOff, levels)
	}
	if onOff == 0 {
		t.Errorf("compression never turned on")
	}
}

// TestAutoPolicySmallBatches: compressed batches too small to fill the
// buffers (a job's tail, split for balance) neither bring a probe nor
// count as a measure of the link: a link-bound stream stays compressed
// through them; batches as small that fill them do bring the probe.
func TestAutoPolicySmallBatches(t *testing.T) {
	src, m, need := textBatch(t)
	const kib = 1 << 10
	d := &Stream{cfg: Config{Mode: Auto}}
	defer d.close()
	d.Observe(wire.CodecNone, 16<<20, 16<<20, 20*time.Second, 19900*time.Millisecond, 0, 0)
	if c := d.Codec(src, m, need); c != wire.CodecZstd {
		t.Fatalf("slow link: codec %d", c)
	}
	link := d.auto.link.v
	for i := range 4 * lastProbe {
		d.Observe(wire.CodecZstd, 600*kib, 250*kib, 25*time.Millisecond, time.Millisecond, 0, 0)
		if c := d.Codec(src, m, need); c != wire.CodecZstd || !d.auto.on {
			t.Fatalf("small batch %d: codec %d, on %v (a probe, or off)", i, c, d.auto.on)
		}
	}
	if d.auto.link.v != link {
		t.Errorf("small batches taken at once changed the link's cost from %.1f to %.1f ns/B", link, d.auto.link.v)
	}
	n := 0
	for d.Codec(src, m, need) == wire.CodecZstd {
		d.Observe(wire.CodecZstd, 6*probeEvidence, 2*probeEvidence, 25*time.Millisecond, time.Millisecond, 0, 0)
		if n++; n > firstProbe+1 {
			t.Fatal("no probe after batches that filled the buffers without waiting")
		}
	}
}

// TestAutoPolicyLinkFull: compressed batches whose writes wait on the
// link a little (5-25% of the time: compressing and the link about as
// fast, the link full) keep the default level and bring no plain probe;
// batches whose writes do not wait go to the fastest level, then bring
// the probe.
func TestAutoPolicyLinkFull(t *testing.T) {
	src, m, need := textBatch(t)
	const mib = 1 << 20
	d := &Stream{cfg: Config{Mode: Auto}}
	defer d.close()
	d.Observe(wire.CodecNone, 16*mib, 16*mib, 20*time.Second, 19900*time.Millisecond, 0, 0)
	if c := d.Codec(src, m, need); c != wire.CodecZstd || d.level != autoDefault {
		t.Fatalf("slow link: codec %d, level %d", c, d.level)
	}
	for i := range 4 * lastProbe {
		d.Observe(wire.CodecZstd, 16*mib, 6*mib, time.Second, 150*time.Millisecond, 0, 0)
		if c := d.Codec(src, m, need); c != wire.CodecZstd || d.level != autoDefault {
			t.Fatalf("batch %d, writes waited 15%%: codec %d, level %d (a probe, or the fastest level)", i, c, d.level)
		}
	}
	// The same waits on a receiver that uses a core are not the link's.
	d.Observe(wire.CodecZstd, 16*mib, 6*mib, time.Second, 150*time.Millisecond, 0, 1.0)
	if c := d.Codec(src, m, need); c != wire.CodecZstd || d.level != autoFastest {
		t.Fatalf("receiver busy: codec %d, level %d, want the fastest level", c, d.level)
	}
	n := 0
	for d.Codec(src, m, need) == wire.CodecZstd {
		if d.level != autoFastest {
			t.Fatalf("writes that did not wait: level %d", d.level)
		}
		d.Observe(wire.CodecZstd, 16*mib, 6*mib, time.Second, 20*time.Millisecond, 0, 0)
		if n++; n > firstProbe+1 {
			t.Fatal("no probe after batches whose writes did not wait")
		}
	}
}

// textBatch writes a file of log text that compresses well into a new
// directory, and returns its source.Source and a batch of it.
func textBatch(t *testing.T) (source.Source, *wire.BatchManifest, []bool) {
	dir := t.TempDir()
	text := strings.Repeat("GET /index.html 200 0.003s user=42 cache=hit\n", 2000)
	if err := os.WriteFile(filepath.Join(dir, "text"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return source.Source{Root: dir}, &wire.BatchManifest{Entries: []model.Entry{{Path: "text", Kind: model.KindFile, Size: int64(len(text))}}}, []bool{true}
}

// TestAutoPolicyBetter: a stream that compresses while the link holds its
// writes back nearly all the time goes to the better level, stays there
// while they still wait a good share of the time, and leaves it when they
// wait less, or when this host's CPUs are busy. A batch too small to fill
// the buffers, whose writes did not wait, does not turn it down.
func TestAutoPolicyBetter(t *testing.T) {
	src, m, need := textBatch(t)
	const mib = 1 << 20
	var log strings.Builder
	d := &Stream{cfg: Config{Mode: Auto}, name: "s0", logf: func(f string, a ...any) {
		fmt.Fprintf(&log, f+"\n", a...)
	}}
	defer d.close()
	d.Observe(wire.CodecNone, 16*mib, 16*mib, 20*time.Second, 19900*time.Millisecond, 0, 0)
	if c := d.Codec(src, m, need); c != wire.CodecZstd || d.level != autoDefault {
		t.Fatalf("slow link, first compressed batch: codec %d, level %s", c, autoLevelNames[d.level])
	}
	steps := []struct {
		what    string
		out     int64
		blocked float64 // share of the batch's time its writes waited
		busy    bool
		want    int
	}{
		{"writes waited 98%", 6 * mib, 0.98, false, autoBetter},
		{"at better, writes waited 60%", 6 * mib, 0.6, false, autoBetter},
		{"a small batch whose writes did not wait", mib / 2, 0, false, autoBetter},
		{"at better, writes waited 30%", 6 * mib, 0.3, false, autoDefault},
		{"at default, writes waited 60%", 6 * mib, 0.6, false, autoDefault},
		{"writes waited 95%", 6 * mib, 0.95, false, autoBetter},
		{"this host's CPUs busy", 6 * mib, 0.95, true, autoDefault},
		{"writes waited 95% again", 6 * mib, 0.95, false, autoBetter},
	}
	for _, s := range steps {
		d.auto.lv.at = d.auto.clock - d.auto.lv.dwell // the last change no longer holds (TestAutoPolicyHolds)
		d.auto.cpuBusy = s.busy
		d.Observe(wire.CodecZstd, 16*mib, s.out, time.Second, time.Duration(s.blocked*float64(time.Second)), 0, 0)
		if c := d.Codec(src, m, need); c != wire.CodecZstd || d.level != s.want {
			t.Fatalf("%s: codec %d, level %s, want %s", s.what, c, autoLevelNames[d.level], autoLevelNames[s.want])
		}
		enc, err := d.Encoder()
		if err != nil || enc != d.levels[s.want] {
			t.Fatalf("%s: the batch's encoder is not the %s level's (%v)", s.what, autoLevelNames[s.want], err)
		}
		if s.want != autoBetter && d.levels[autoBetter] != nil {
			t.Fatalf("%s: the better level's encoder is still held", s.what)
		}
	}
	if !strings.Contains(log.String(), "s0: zstd level better: the link held the writes back 98% of the time") {
		t.Errorf("log:\n%s", log.String())
	}
	// Under --bwlimit a busy host still compresses (the limiter holds the
	// writes back whatever the CPUs do), but not at the better level.
	d.auto.cpuBusy, d.auto.limited = true, true
	d.auto.lv.at = d.auto.clock - d.auto.lv.dwell
	d.Observe(wire.CodecZstd, 16*mib, 6*mib, time.Second, 950*time.Millisecond, 0, 0)
	if c := d.Codec(src, m, need); c != wire.CodecZstd || d.level != autoDefault {
		t.Fatalf("--bwlimit, this host's CPUs busy: codec %d, level %s, want the default level", c, autoLevelNames[d.level])
	}
}

// TestAutoLevelHolds: samples whose ratio of the fastest level's output to
// the default's straddles fastEnough from one batch to the next (the
// half-and-half tree's, as a far stream logged them) leave the stream at
// one level; data that changes by a wide margin (text, then numbers that
// the fastest level leaves nearly whole) still moves it.
func TestAutoLevelHolds(t *testing.T) {
	half := [][2]float64{ // fastest, default
		{0.69, 0.64}, {0.44, 0.39}, {0.68, 0.61}, {0.61, 0.58}, {0.52, 0.50},
		{0.27, 0.26}, {0.55, 0.48}, {0.59, 0.53}, {0.60, 0.54}, {0.56, 0.51},
		{0.68, 0.63}, {0.80, 0.69}, {0.49, 0.48}, {0.66, 0.59}, {0.48, 0.44},
		{0.42, 0.38}, {0.61, 0.57}, {0.61, 0.52}, {0.59, 0.57}, {0.55, 0.50},
	}
	// Each sample on its own would choose the other level time and again.
	perSample, last := 0, -1
	for _, r := range half {
		l := autoFastest
		if r[0] > max(fastEnough*r[1], r[1]+0.02) {
			l = autoDefault
		}
		if last >= 0 && l != last {
			perSample++
		}
		last = l
	}
	if perSample < 5 {
		t.Fatalf("the samples change level only %d times on their own: they do not test holding", perSample)
	}
	d := &Stream{cfg: Config{Mode: Auto}}
	changes := 0
	for i := range 3 * len(half) {
		r := half[i%len(half)]
		l := d.pickLevel(r[0], r[1])
		if i > 0 && l != d.level {
			changes++
		}
		d.level = l
	}
	if changes > 1 {
		t.Errorf("the half-and-half tree's samples changed the level %d times in 60 batches, want at most 1", changes)
	}
	d = &Stream{cfg: Config{Mode: Auto}}
	d.level = d.pickLevel(0.10, 0.098) // text
	if d.level != autoFastest {
		t.Fatalf("text: level %s, want fastest", autoLevelNames[d.level])
	}
	for range 3 {
		d.level = d.pickLevel(0.92, 0.47) // numbers without near repeats
	}
	if d.level != autoDefault {
		t.Errorf("after three samples of numbers: level %s, want default", autoLevelNames[d.level])
	}
	d.auto.slowLink = true
	d.level = autoFastest
	if l := d.pickLevel(0.10, 0.098); l != autoDefault {
		t.Errorf("the link sets the pace: level %s, want default", autoLevelNames[l])
	}
}

// TestAutoLevelLinkLog: a stream that goes to the default level because the
// link sets the pace says so, not that its sample chose it.
func TestAutoLevelLinkLog(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("GET /index.html 200 0.003s user=42 cache=hit\n", 2000)
	os.WriteFile(filepath.Join(dir, "text"), []byte(text), 0o644)
	src := source.Source{Root: dir}
	m := &wire.BatchManifest{Entries: []model.Entry{{Path: "text", Kind: model.KindFile, Size: int64(len(text))}}}
	var log strings.Builder
	d := &Stream{cfg: Config{Mode: Auto}, name: "s0", logf: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }}
	defer d.close()
	d.auto.on = true
	if _, _, ok := d.trySample(src, m, []bool{true}); !ok || d.level != autoFastest {
		t.Fatalf("text: level %s (ok %v), want fastest", autoLevelNames[d.level], ok)
	}
	d.auto.clock += time.Minute               // past the hold
	d.auto.slowLink, d.auto.waits = true, 0.5 // (from 75%: the better level)
	if _, _, ok := d.trySample(src, m, []bool{true}); !ok || d.level != autoDefault {
		t.Fatalf("the link sets the pace: level %s (ok %v), want default", autoLevelNames[d.level], ok)
	}
	if want := "s0: zstd level default: the link sets the pace (it held the writes back 50% of the time)"; !strings.Contains(log.String(), want) {
		t.Errorf("log:\n%s\nwant a line %q", log.String(), want)
	}
}
