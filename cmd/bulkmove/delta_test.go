package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/holes"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/wire"
)

// deltaCase is a large file at DEST and what SRC's version makes of it.
type deltaCase struct {
	name string
	// change makes SRC's version from DEST's; maxSent bounds the bytes
	// on the wire (the --stats count, frames and all).
	change  func(r *rand.Rand, old []byte) []byte
	maxSent int64
}

const deltaSize = 8 << 20

var deltaCases = []deltaCase{
	{"edits", func(r *rand.Rand, old []byte) []byte {
		// At most 32 blocks.
		return editRuns(r, old)
	}, 32*wire.BlockSize(deltaSize) + 64<<10},
	{"append", func(r *rand.Rand, old []byte) []byte {
		return append(bytes.Clone(old), randBytes(r, 300_000)...)
	}, 300_000 + wire.BlockSize(deltaSize) + 64<<10},
	{"truncate", func(r *rand.Rand, old []byte) []byte {
		return bytes.Clone(old[:len(old)-1_234_567])
	}, 64 << 10},
	{"replaced", func(r *rand.Rand, old []byte) []byte {
		// Same size, all new: all of it goes (and lands whole).
		return randBytes(r, len(old))
	}, deltaSize + 256<<10},
}

// editRuns is old with 16 runs of 100 bytes changed at random, unaligned
// offsets.
func editRuns(r *rand.Rand, old []byte) []byte {
	b := bytes.Clone(old)
	for range 16 {
		off := r.IntN(len(b) - 100)
		for k := range 100 {
			b[off+k] ^= 0x5a
		}
	}
	return b
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for k := 0; k < 8 && i+k < n; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return b
}

// runDeltaMode moves src's contents to dst with args: pushed to local
// agents (via-agent), pushed over SSH (ssh, with the SSH config cfg) or
// pulled over SSH (pull).
func runDeltaMode(t *testing.T, mode string, args []string, cfg, src, dst string) (string, int) {
	t.Helper()
	switch mode {
	case "via-agent":
		return runBM(t, nil, append(args, "--via-agent", src+"/", dst)...)
	case "ssh":
		return runPushPull(t, nil, append(args, "--ssh-config", cfg), false, src, dst)
	case "pull":
		return runPushPull(t, nil, append(args, "--ssh-config", cfg), true, src, dst)
	}
	t.Fatalf("no mode %q", mode)
	return "", 0
}

var totalSent = regexp.MustCompile(`(?m)^(?:box2: )?Total bytes sent: ([\d,]+)$`)

// sentBytes is --stats' count of the bytes the sender wrote to its streams.
func sentBytes(t *testing.T, out string) int64 {
	t.Helper()
	m := totalSent.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no 'Total bytes sent' in:\n%s", out)
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// deltaTree writes, for each case, DEST's old version and SRC's new one
// (with another mtime), and returns the new contents by name.
func deltaTree(t *testing.T, src, dst string) map[string][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 30))
	want := map[string][]byte{}
	for _, dir := range []string{src, dst} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	for _, c := range deltaCases {
		o := randBytes(r, deltaSize)
		n := c.change(r, o)
		if err := os.WriteFile(filepath.Join(dst, c.name), o, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dst, c.name), old, old); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, c.name), n, 0o644); err != nil {
			t.Fatal(err)
		}
		want[c.name] = n
	}
	return want
}

// TestDeltaPush: changed large files go as a block delta over the wire
// (pushed to local agents and over SSH, pulled over SSH): each ends byte for byte as SRC's, and the
// bytes sent are those of the blocks that changed, not the files'.
func TestDeltaPush(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	for _, mode := range []string{"via-agent", "ssh", "pull"} {
		t.Run(mode, func(t *testing.T) {
			for _, c := range deltaCases {
				t.Run(c.name, func(t *testing.T) {
					dir := shmDir(t)
					src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
					want := deltaTree(t, src, dst)
					// One file a run: the bytes sent are that file's.
					for name := range want {
						if name != c.name {
							os.Remove(filepath.Join(src, name))
						}
					}
					args := []string{"--split-size", "0", "--delta-min", "1MiB", "--stats", "-v", "-j", "1"}
					out, code := runDeltaMode(t, mode, args, cfg, src, dst)
					if code != 0 {
						t.Fatalf("exit %d:\n%s", code, out)
					}
					got, err := os.ReadFile(filepath.Join(dst, c.name))
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want[c.name]) {
						t.Fatalf("%s at DEST differs from SRC's (%d bytes, want %d)", c.name, len(got), len(want[c.name]))
					}
					// (A pull's sender, on box2, says it in its summary.)
					if said := strings.Contains(out, "delta: "+c.name+" ") || mode == "pull" && strings.Contains(out, "not sent (block delta)"); !said && c.name != "replaced" {
						t.Errorf("-v does not say %s went as a delta:\n%s", c.name, out)
					}
					if n := sentBytes(t, out); n > c.maxSent {
						t.Errorf("%d bytes sent for %s, want at most %d", n, c.name, c.maxSent)
					}
					leftovers, _ := filepath.Glob(filepath.Join(dst, ".bulkmove*"))
					if len(leftovers) > 0 {
						t.Errorf("temporaries left at DEST: %v", leftovers)
					}
				})
			}
		})
	}
}

// TestDeltaWholeFile: --whole-file (-W) sends the changed file whole,
// and --no-whole-file after it turns the delta on again.
func TestDeltaWholeFile(t *testing.T) {
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	want := deltaTree(t, src, dst)
	out, code := runBM(t, nil, "--via-agent", "--split-size", "0", "--delta-min", "1MiB", "--stats", "-W", src+"/", dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for name, b := range want {
		if got, _ := os.ReadFile(filepath.Join(dst, name)); !bytes.Equal(got, b) {
			t.Fatalf("%s differs", name)
		}
	}
	var total int64
	for _, b := range want {
		total += int64(len(b))
	}
	if n := sentBytes(t, out); n < total {
		t.Fatalf("-W sent %d bytes of %d: not whole", n, total)
	}
	if strings.Contains(out, "block delta") {
		t.Fatalf("-W: the summary speaks of a delta:\n%s", out)
	}
}

// TestDeltaRanges: a changed file larger than --split-size goes as a
// block delta range by range (pushed to local agents and over SSH; a pull
// does not split): edits at random offsets across its ranges, an append past
// its last range, a truncation that drops ranges; each ends byte for byte
// as SRC's, with the bytes of the blocks that changed sent, not the
// file's.
func TestDeltaRanges(t *testing.T) {
	const size = 20<<20 + 54_321 // six ranges of 4 MiB, the last short
	cases := []deltaCase{
		{"edits", func(r *rand.Rand, old []byte) []byte {
			b := editRuns(r, old)
			// And one run across a range's boundary.
			for k := 4<<20 - 50; k < 4<<20+50; k++ {
				b[k] ^= 0xa5
			}
			return b
		}, 34*128<<10 + 256<<10},
		{"append", func(r *rand.Rand, old []byte) []byte {
			return append(bytes.Clone(old), randBytes(r, 5<<20)...)
		}, 5<<20 + 128<<10 + 256<<10},
		{"truncate", func(r *rand.Rand, old []byte) []byte {
			return bytes.Clone(old[:len(old)-9_876_543])
		}, 256 << 10},
	}
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	for _, mode := range []string{"via-agent", "ssh"} {
		t.Run(mode, func(t *testing.T) {
			for ci, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					dir := shmDir(t)
					src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
					for _, d := range []string{src, dst} {
						if err := os.MkdirAll(d, 0o755); err != nil {
							t.Fatal(err)
						}
					}
					r := rand.New(rand.NewPCG(uint64(ci), 31))
					old := randBytes(r, size)
					want := c.change(r, old)
					if err := os.WriteFile(filepath.Join(dst, "vm.img"), old, 0o644); err != nil {
						t.Fatal(err)
					}
					then := time.Now().Add(-time.Hour)
					if err := os.Chtimes(filepath.Join(dst, "vm.img"), then, then); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(src, "vm.img"), want, 0o644); err != nil {
						t.Fatal(err)
					}
					args := []string{"--split-size", "4MiB", "--delta-min", "1MiB", "--stats", "-v", "-j", "2"}
					out, code := runDeltaMode(t, mode, args, cfg, src, dst)
					if code != 0 {
						t.Fatalf("exit %d:\n%s", code, out)
					}
					got, err := os.ReadFile(filepath.Join(dst, "vm.img"))
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("vm.img at DEST differs from SRC's (%d bytes, want %d)", len(got), len(want))
					}
					if !strings.Contains(out, "not sent (block delta)") {
						t.Errorf("the summary does not say what the delta saved:\n%s", out)
					}
					if !strings.Contains(out, "delta: vm.img 4.0 MiB at 4.0 MiB, ") {
						t.Errorf("-v does not name the second range as a delta:\n%s", out)
					}
					if n := sentBytes(t, out); n > c.maxSent {
						t.Errorf("%d bytes sent for a %d-byte file, want at most %d:\n%s", n, len(want), c.maxSent, out)
					}
					leftovers, _ := filepath.Glob(filepath.Join(dst, ".bulkmove*"))
					if len(leftovers) > 0 {
						t.Errorf("temporaries left at DEST: %v", leftovers)
					}
				})
			}
		})
	}
}

// TestDeltaSparse: a sparse VM image (256 MiB, 5 MiB of data) changed in
// two blocks, a hole punched where it held data and data written where
// it had a hole goes as a block delta of about the data that changed,
// not its holes nor its other data; DEST ends byte for byte as SRC's,
// taking no more room, with holes where SRC has them: built in a copy,
// or patched in place (--inplace).
func TestDeltaSparse(t *testing.T) {
	for _, mode := range []string{"copy", "inplace"} {
		t.Run(mode, func(t *testing.T) { deltaSparse(t, mode == "inplace") })
	}
}

func deltaSparse(t *testing.T, inPlace bool) {
	const size, mb = 256 << 20, 1 << 20
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(30, 8))
	old, err := os.Create(filepath.Join(dst, "vm.img"))
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 64 * mb, 128 * mb, 200 * mb, size - mb} {
		old.WriteAt(randBytes(r, mb), off)
	}
	old.Truncate(size)
	old.Close()
	if allocated(t, filepath.Join(dst, "vm.img")) > 6*mb {
		t.Skipf("the filesystem of %s keeps no holes", dir)
	}
	b, err := os.ReadFile(filepath.Join(dst, "vm.img"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(src, "vm.img"))
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 64 * mb, 128 * mb, 200 * mb, size - mb} { // the same data, holes between
		f.WriteAt(b[off:off+mb], off)
	}
	f.Truncate(size)
	f.WriteAt([]byte("changed"), 64*mb+1000)       // a block changed
	f.WriteAt([]byte("changed too"), 200*mb+5_000) // and another
	f.WriteAt(randBytes(r, mb), 32*mb)             // a hole filled
	// A hole punched where DEST holds data.
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 128*mb, mb); err != nil {
		t.Skipf("punch a hole: %v", err)
	}
	f.Close()
	then := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dst, "vm.img"), then, then); err != nil {
		t.Fatal(err)
	}

	args := []string{"--via-agent", "--split-size", "0", "--delta-min", "1MiB", "--stats", "-v", "-j", "1"}
	if inPlace {
		args = append(args, "--inplace")
	}
	out, code := runBM(t, nil, append(args, src+"/", dst)...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst)
	if !strings.Contains(out, "delta: vm.img ") {
		t.Errorf("-v does not say vm.img went as a delta:\n%s", out)
	}
	t.Logf("sent %d bytes; vm.img takes %d bytes at SRC, %d at DEST", sentBytes(t, out), allocated(t, filepath.Join(src, "vm.img")), allocated(t, filepath.Join(dst, "vm.img")))
	// The filled hole's 1 MiB and two blocks, and the frames.
	if n, want := sentBytes(t, out), mb+2*wire.BlockSize(size)+64<<10; n > want {
		t.Errorf("%d bytes sent for 1 MiB of new data and two changed blocks, want at most %d:\n%s", n, want, out)
	}
	if s, d := allocated(t, filepath.Join(src, "vm.img")), allocated(t, filepath.Join(dst, "vm.img")); d > s+128<<10 {
		t.Errorf("vm.img takes %d bytes at DEST, %d at SRC", d, s)
	}
	// Every byte of data at DEST is data at SRC: SRC's holes are holes.
	sd, dd := dataMap(t, filepath.Join(src, "vm.img")), dataMap(t, filepath.Join(dst, "vm.img"))
	for _, x := range dd {
		if !covered(sd, x) {
			t.Errorf("DEST has data at %d+%d, where SRC has a hole (SRC's data: %v; DEST's: %v)", x.Off, x.Len, sd, dd)
		}
	}
}

// allocated is what the file at p takes on disk.
func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// dataMap is where the data of the file at p lies.
func dataMap(t *testing.T, p string) []wire.Extent {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m := holes.Data(int(f.Fd()), 0, st.Size(), 1<<20)
	if m == nil {
		m = []wire.Extent{{Off: 0, Len: st.Size()}}
	}
	return m
}

// covered says whether x lies within the extents of m.
func covered(m []wire.Extent, x wire.Extent) bool {
	for _, y := range m {
		if x.Off >= y.Off && x.Off < y.Off+y.Len {
			if x.Off+x.Len <= y.Off+y.Len {
				return true
			}
			x = wire.Extent{Off: y.Off + y.Len, Len: x.Off + x.Len - y.Off - y.Len}
		}
	}
	return false
}
