package extract_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// batch is one batch of a hostile case, sent to receiver recv (two
// receivers on one root are two streams).
type batch struct {
	recv    int
	final   bool
	entries []model.Entry
	files   []tarFile // the tar stream, built with archive/tar
	raw     []byte    // or the raw tar stream
}

type hostile struct {
	name    string
	setup   func(t *testing.T, s *sandbox)
	batches func(s *sandbox) []batch
	// want is the entry name that the returned error or an ack's
	// EntryError must mention; "" when the batch may succeed (then the
	// case only checks that nothing escaped).
	want      string
	streamErr bool     // some Receive must fail with ErrStream
	absent    []string // names that must not exist under the root
	// dirs must be directories under the root afterwards: a file in the
	// way of a directory is replaced by it.
	dirs []string
}

func one(b batch) func(*sandbox) []batch { return func(*sandbox) []batch { return []batch{b} } }

// mentions reports whether msg names entry p, verbatim or %q-quoted.
func mentions(msg, p string) bool {
	return strings.Contains(msg, strconv.Quote(p)) || (p != "" && strings.Contains(msg, p))
}

func bigTar(t testing.TB, name string, size int64, data string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Size: size, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	// No Close: the stream ends after the data.
	return buf.Bytes()
}

func hostileCases(t testing.TB) []hostile {
	long := strings.Repeat("x", 256)
	withNlink := func(e model.Entry, n uint32) model.Entry { e.Nlink = n; return e }
	throughSymlink := func(target, file string) func(*sandbox) []batch {
		return func(s *sandbox) []batch {
			if target == "$outside" {
				target = s.outside
			}
			return []batch{
				{final: true, entries: []model.Entry{symE("evil", target)}},
				{entries: []model.Entry{fileE(file, 3)}, files: []tarFile{tf(file, "abc")}},
			}
		}
	}
	// One byte over archive/tar's 1 MiB limit on PAX headers.
	const paxSize = 1<<20 + 1
	hugePAX := append(rawHeader("PaxHeaders/victim", tar.TypeXHeader, paxSize), pad(bytes.Repeat([]byte("a"), paxSize))...)
	copy(hugePAX[512:], "1048577 comment=")
	hugePAX = append(hugePAX, rawEntry("victim", tar.TypeReg, []byte("abc"))...)

	return []hostile{
		// Names in the tar stream of a file batch.
		{name: "absolute", batches: one(batch{entries: []model.Entry{fileE("/etc/"+canary, 3)}, files: []tarFile{tf("/etc/"+canary, "abc")}}),
			want: "/etc/" + canary, streamErr: true},
		{name: "dotdot", batches: one(batch{entries: []model.Entry{fileE("..", 3)}, files: []tarFile{tf("..", "abc")}}),
			want: "..", streamErr: true},
		{name: "dotdot/x", batches: one(batch{entries: []model.Entry{fileE("../outside/x", 3)}, files: []tarFile{tf("../outside/x", "abc")}}),
			want: "../outside/x", streamErr: true},
		{name: "a/../../x", batches: one(batch{entries: []model.Entry{fileE("a/../../x", 3)}, files: []tarFile{tf("a/../../x", "abc")}}),
			want: "a/../../x", streamErr: true, absent: []string{"a"}},
		{name: "unclean ./x", batches: one(batch{entries: []model.Entry{fileE("./x", 3)}, files: []tarFile{tf("./x", "abc")}}),
			want: "./x", streamErr: true, absent: []string{"x"}},
		{name: "empty name", batches: one(batch{entries: []model.Entry{fileE("", 3)}, raw: rawTar(rawEntry("", tar.TypeReg, []byte("abc")))}),
			want: "", streamErr: true},
		{name: "NUL in ustar name", batches: one(batch{entries: []model.Entry{fileE("a\x00b", 3)}, raw: rawTar(rawEntry("a\x00b", tar.TypeReg, []byte("abc")))}),
			want: "a", streamErr: true, absent: []string{"a"}},
		{name: "NUL in PAX path", batches: one(batch{entries: []model.Entry{fileE("a\x00b", 3)},
			raw: rawTar(rawEntry("PaxHeaders/a", tar.TypeXHeader, []byte(paxRecord("path", "a\x00b"))), rawEntry("a", tar.TypeReg, []byte("abc")))}),
			want: "a\x00b", streamErr: true, absent: []string{"a"}},
		{name: "256-byte component", batches: one(batch{entries: []model.Entry{fileE("d/"+long, 3)}, files: []tarFile{tf("d/"+long, "abc")}}),
			want: "d/" + long, streamErr: true},
		{name: "dot as a file", batches: one(batch{entries: []model.Entry{fileE(".", 3)}, files: []tarFile{tf(".", "abc")}}),
			want: "."},
		{name: "file under a file", batches: func(*sandbox) []batch {
			return []batch{
				{entries: []model.Entry{fileE("f", 3)}, files: []tarFile{tf("f", "abc")}},
				{entries: []model.Entry{fileE("f/x", 3)}, files: []tarFile{tf("f/x", "abc")}},
			}
		}, dirs: []string{"f"}},

		// Tar headers that differ from the manifest.
		{name: "10 GB declared, 10 bytes sent", batches: func(*sandbox) []batch {
			return []batch{{entries: []model.Entry{fileE("big", 10<<30)}, raw: bigTar(t, "big", 10<<30, "0123456789")}}
		}, want: "big", streamErr: true, absent: []string{"big"}},
		{name: "sparse: 256 MiB declared, 10 bytes sent", batches: one(batch{entries: []model.Entry{fileE("sparse", 256<<20)}, raw: sparseTar("sparse", 256<<20)}),
			want: "sparse", streamErr: true, absent: []string{"sparse"}},
		{name: "tar entry not in the manifest", batches: one(batch{entries: []model.Entry{fileE("a", 3)}, files: []tarFile{tf("b", "abc")}}),
			want: "b", streamErr: true, absent: []string{"a", "b"}},
		{name: "tar entry twice", batches: one(batch{entries: []model.Entry{fileE("a", 3)}, files: []tarFile{tf("a", "abc"), tf("a", "xyz")}}),
			want: "a", streamErr: true, absent: []string{"a"}},
		{name: "tar size smaller than the manifest", batches: one(batch{entries: []model.Entry{fileE("a", 5)}, files: []tarFile{tf("a", "abc")}}),
			want: "a", streamErr: true, absent: []string{"a"}},
		{name: "tar size larger than the manifest", batches: one(batch{entries: []model.Entry{fileE("a", 3)}, files: []tarFile{tf("a", "abcdefghij")}}),
			want: "a", streamErr: true, absent: []string{"a"}},
		{name: "huge PAX record", batches: one(batch{entries: []model.Entry{fileE("victim", 3)}, raw: rawTar(hugePAX)}),
			want: "victim", streamErr: true, absent: []string{"victim"}},
		{name: "tar hard link to /etc/passwd", batches: one(batch{entries: []model.Entry{fileE("a", 0)}, files: []tarFile{{name: "a", typ: tar.TypeLink, link: "/etc/passwd"}}}),
			want: "a", streamErr: true, absent: []string{"a"}},
		{name: "tar symlink to /etc", batches: one(batch{entries: []model.Entry{fileE("a", 0)}, files: []tarFile{{name: "a", typ: tar.TypeSymlink, link: "/etc"}}}),
			want: "a", streamErr: true, absent: []string{"a"}},
		{name: "tar device node", batches: one(batch{entries: []model.Entry{fileE("dev", 0)}, raw: rawTar(rawHeader("dev", tar.TypeChar, 0))}),
			want: "dev", streamErr: true, absent: []string{"dev"}},
		{name: "tar fifo", batches: one(batch{entries: []model.Entry{fileE("fifo", 0)}, raw: rawTar(rawHeader("fifo", tar.TypeFifo, 0))}),
			want: "fifo", streamErr: true, absent: []string{"fifo"}},
		{name: "data of another batch", batches: func(*sandbox) []batch {
			return []batch{{entries: []model.Entry{fileE("a", 3)}, raw: tarOf(t, 99, tf("a", "abc"))}}
		}, want: "batch #99", streamErr: true, absent: []string{"a"}},
		{name: "file data in a final batch", batches: func(s *sandbox) []batch {
			return []batch{{final: true, entries: []model.Entry{symE("evil", s.outside), fileE("evil/x", 3)}, files: []tarFile{tf("evil/x", "abc")}}}
		}, want: "evil/x", absent: []string{"evil/x"}},

		// A symlink pointing out, then a file through it.
		{name: "symlink ../../outside then evil/passwd", batches: throughSymlink("../../outside", "evil/passwd"), want: "evil/passwd"},
		{name: "symlink ../outside then evil/passwd", batches: throughSymlink("../outside", "evil/passwd"), want: "evil/passwd"},
		{name: "symlink .. then evil/x", batches: throughSymlink("..", "evil/x"), want: "evil/x"},
		{name: "absolute symlink then evil/passwd", batches: throughSymlink("$outside", "evil/passwd"), want: "evil/passwd"},
		{name: "symlink /etc then evil/canary", batches: throughSymlink("/etc", "evil/"+canary), want: "evil/" + canary},
		{name: "symlink then evil/deep/dir/x", batches: throughSymlink("../../outside", "evil/deep/dir/x"), want: "evil/deep/dir/x"},
		{name: "symlink chain", batches: func(s *sandbox) []batch {
			return []batch{
				{final: true, entries: []model.Entry{symE("b", "../../outside"), symE("a", "b")}},
				{entries: []model.Entry{fileE("a/x", 3)}, files: []tarFile{tf("a/x", "abc")}},
			}
		}, want: "a/x"},
		{name: "two streams: symlink on one, file through it on the other", batches: func(s *sandbox) []batch {
			return []batch{
				{recv: 0, final: true, entries: []model.Entry{symE("evil", "../../outside")}},
				{recv: 1, entries: []model.Entry{fileE("evil/passwd", 3)}, files: []tarFile{tf("evil/passwd", "abc")}},
			}
		}, want: "evil/passwd"},
		{name: "two streams: absolute symlink on one, file through it on the other", batches: func(s *sandbox) []batch {
			return []batch{
				{recv: 1, final: true, entries: []model.Entry{symE("evil", s.outside)}},
				{recv: 0, entries: []model.Entry{fileE("evil/passwd", 3)}, files: []tarFile{tf("evil/passwd", "abc")}},
			}
		}, want: "evil/passwd"},
		{name: "two streams: directory first, then a symlink over it", batches: func(s *sandbox) []batch {
			return []batch{
				{recv: 1, entries: []model.Entry{fileE("evil/passwd", 3)}, files: []tarFile{tf("evil/passwd", "abc")}},
				{recv: 0, final: true, entries: []model.Entry{symE("evil", s.outside)}},
				{recv: 1, entries: []model.Entry{fileE("evil/shadow", 3)}, files: []tarFile{tf("evil/shadow", "abc")}},
			}
		}, want: "evil"},
		{name: "directory metadata through a symlink", batches: func(s *sandbox) []batch {
			return []batch{
				{final: true, entries: []model.Entry{symE("evil", s.outside)}},
				{final: true, entries: []model.Entry{dirE("evil", 0o777)}},
			}
		}, want: "evil"},
		{name: "file over a symlink pointing out", batches: func(s *sandbox) []batch {
			return []batch{
				{final: true, entries: []model.Entry{symE("l", filepath.Join(s.outside, "x"))}},
				{entries: []model.Entry{fileE("l", 3)}, files: []tarFile{tf("l", "abc")}},
			}
		}},
		{name: "symlink over a directory", batches: func(s *sandbox) []batch {
			// (The directory is empty: the symlink replaces it.)
			return []batch{{final: true, entries: []model.Entry{dirE("d", 0o755), symE("d", s.outside)}}}
		}},

		// Bad names and targets in final batches.
		{name: "symlink absolute name", batches: one(batch{final: true, entries: []model.Entry{symE("/etc/"+canary, "x")}}), want: "/etc/" + canary},
		{name: "symlink ..", batches: one(batch{final: true, entries: []model.Entry{symE("..", "x")}}), want: ".."},
		{name: "symlink a/../../x", batches: one(batch{final: true, entries: []model.Entry{symE("a/../../x", "x")}}), want: "a/../../x", absent: []string{"a"}},
		{name: "symlink empty name", batches: one(batch{final: true, entries: []model.Entry{symE("", "x")}}), want: ""},
		{name: "symlink NUL name", batches: one(batch{final: true, entries: []model.Entry{symE("a\x00b", "x")}}), want: "a\x00b", absent: []string{"a"}},
		{name: "symlink empty target", batches: one(batch{final: true, entries: []model.Entry{symE("l", "")}}), want: "l", absent: []string{"l"}},
		{name: "symlink NUL target", batches: one(batch{final: true, entries: []model.Entry{symE("l", "/etc\x00x")}}), want: "l", absent: []string{"l"}},
		{name: "directory ../outside", batches: one(batch{final: true, entries: []model.Entry{dirE("../outside", 0o777)}}), want: "../outside"},
		{name: "directory absolute", batches: func(s *sandbox) []batch {
			return []batch{{final: true, entries: []model.Entry{dirE(s.outside, 0o777)}}}
		}, want: "outside"},
		{name: "directory 256-byte name", batches: one(batch{final: true, entries: []model.Entry{dirE(long, 0o755)}}), want: long},
		{name: "file in a final batch", batches: one(batch{final: true, entries: []model.Entry{fileE("f", 3)}}), want: "f", absent: []string{"f"}},
		{name: "file with data in a final batch", batches: one(batch{final: true, entries: []model.Entry{fileE("f", 3)}, files: []tarFile{tf("f", "abc")}}),
			want: "f", absent: []string{"f"}},

		// Hard links.
		{name: "hard link to /etc/passwd", batches: one(batch{final: true, entries: []model.Entry{hardE("h", "/etc/passwd")}}), want: "h", absent: []string{"h"}},
		{name: "hard link to ../outside", batches: one(batch{final: true, entries: []model.Entry{hardE("h", "../outside")}}), want: "h", absent: []string{"h"}},
		{name: "hard link to a/../../outside", batches: one(batch{final: true, entries: []model.Entry{hardE("h", "a/../../outside")}}), want: "h", absent: []string{"h"}},
		{name: "hard link to a file the receiver did not write",
			setup: func(t *testing.T, s *sandbox) {
				if err := os.WriteFile(filepath.Join(s.root, "pre"), []byte("secret"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			batches: one(batch{final: true, entries: []model.Entry{hardE("h", "pre")}}), want: "h", absent: []string{"h"}},
		{name: "hard link to a file written with one link", batches: func(*sandbox) []batch {
			return []batch{
				{entries: []model.Entry{fileE("f", 3)}, files: []tarFile{tf("f", "abc")}},
				{final: true, entries: []model.Entry{hardE("h", "f")}},
			}
		}, want: "h", absent: []string{"h"}},
		{name: "hard link to a written file since replaced by a symlink", batches: func(s *sandbox) []batch {
			return []batch{
				{entries: []model.Entry{withNlink(fileE("f", 3), 2)}, files: []tarFile{tf("f", "abc")}},
				{final: true, entries: []model.Entry{symE("f", filepath.Join(s.outside, "x")), hardE("h", "f")}},
			}
		}, want: "h", absent: []string{"h"}},
		{name: "hard link to a directory", batches: one(batch{final: true, entries: []model.Entry{dirE("d", 0o755), hardE("h", "d")}}), want: "h", absent: []string{"h"}},
		{name: "hard link through a symlink pointing out", batches: func(s *sandbox) []batch {
			return []batch{
				{entries: []model.Entry{withNlink(fileE("f", 3), 2)}, files: []tarFile{tf("f", "abc")}},
				{final: true, entries: []model.Entry{symE("evil", s.outside), hardE("evil/h", "f")}},
			}
		}, want: "evil/h"},
		{name: "hard link on another stream", batches: func(s *sandbox) []batch {
			return []batch{
				{recv: 0, entries: []model.Entry{withNlink(fileE("f", 3), 2)}, files: []tarFile{tf("f", "abc")}},
				{recv: 1, final: true, entries: []model.Entry{hardE("h", "f")}},
			}
		}, want: "h", absent: []string{"h"}},
	}
}

// TestHostile feeds each hostile case to receivers over a root inside a
// parent directory and checks that nothing escaped the root, no temporary
// file is left, and the error names the entry.
func TestHostile(t *testing.T) {
	// One file at a time, and many at once (a slow filesystem's setting).
	for _, io := range []int{0, 16} {
		for _, tc := range hostileCases(t) {
			t.Run(fmt.Sprintf("io=%d/%s", io, tc.name), func(t *testing.T) { hostileCase(t, tc, io) })
		}
	}
}

func hostileCase(t *testing.T, tc hostile, io int) {
	{
		{
			s := newSandbox(t)
			if tc.setup != nil {
				tc.setup(t, s)
			}
			opt := extract.Options{IOConcurrency: io}
			recvs := []*extract.Receiver{s.open(t, opt), s.open(t, opt)}
			var msgs []string
			sawStream := false
			for i, b := range tc.batches(s) {
				id := uint64(i + 1)
				m := &wire.BatchManifest{ID: id, Entries: b.entries}
				if b.final {
					m.Flags = wire.FlagFinal
				}
				// What the agent would see: the manifest through the codec.
				m, err := wire.DecodeManifest(wire.EncodeManifest(m))
				if err != nil {
					t.Fatalf("batch %d: manifest does not decode: %v", id, err)
				}
				data := b.raw
				if data == nil {
					data = tarOf(t, id, b.files...)
				}
				r := recvs[b.recv]
				txn, err := r.Receive(m, needFor(r, m), bytes.NewReader(data))
				if err != nil {
					t.Logf("batch %d: Receive: %v", id, err)
					msgs = append(msgs, err.Error())
					sawStream = sawStream || errors.Is(err, extract.ErrStream)
					if txn != nil {
						t.Errorf("batch %d: Receive returned both a Txn and an error", id)
					}
					continue
				}
				ack := txn.Commit(id, nil)
				if ack.ID != id {
					t.Errorf("ack of batch %d has id %d", id, ack.ID)
				}
				for _, e := range ack.Errors {
					t.Logf("batch %d: entry %d: %s", id, e.Index, e.Msg)
					if e.Index < 0 || e.Index >= len(m.Entries) {
						t.Errorf("batch %d: entry error with index %d of %d", id, e.Index, len(m.Entries))
					}
					msgs = append(msgs, e.Msg)
				}
			}
			s.check(t)
			if tc.streamErr && !sawStream {
				t.Errorf("no Receive failed with ErrStream")
			}
			if tc.want != "" || tc.streamErr {
				found := false
				for _, msg := range msgs {
					found = found || mentions(msg, tc.want)
				}
				if !found {
					t.Errorf("no error names %q; errors: %q", tc.want, msgs)
				}
			}
			for _, p := range tc.absent {
				if _, err := os.Lstat(filepath.Join(s.root, p)); err == nil {
					t.Errorf("%q exists under the root", p)
				}
			}
			for _, p := range tc.dirs {
				if fi, err := os.Lstat(filepath.Join(s.root, p)); err != nil || !fi.IsDir() {
					t.Errorf("%q is not a directory under the root: %v %v", p, fi, err)
				}
			}
		}
	}
}

// The manifest codec refuses what the receiver must never create: entries of
// unknown kinds and modes of device nodes, FIFOs, sockets and the like. The
// error names the entry.
func TestDecodeManifestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    model.Entry
	}{
		{"unknown kind 0", model.Entry{Path: "k0", Kind: 0}},
		{"unknown kind 9", model.Entry{Path: "k9", Kind: 9}},
		{"unknown kind 255", model.Entry{Path: "k255", Kind: 255}},
		{"device", model.Entry{Path: "sda", Kind: model.KindFile, Mode: fs.ModeDevice | 0o660}},
		{"char device", model.Entry{Path: "null", Kind: model.KindFile, Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666}},
		{"fifo", model.Entry{Path: "fifo", Kind: model.KindFile, Mode: fs.ModeNamedPipe | 0o644}},
		{"socket", model.Entry{Path: "sock", Kind: model.KindFile, Mode: fs.ModeSocket | 0o755}},
		{"dir bit", model.Entry{Path: "dirbit", Kind: model.KindDir, Mode: fs.ModeDir | 0o755}},
		{"symlink bit", model.Entry{Path: "symbit", Kind: model.KindSymlink, Mode: fs.ModeSymlink | 0o777, Link: "x"}},
		{"irregular", model.Entry{Path: "irr", Kind: model.KindFile, Mode: fs.ModeIrregular | 0o644}},
		{"device on a directory", model.Entry{Path: "ddev", Kind: model.KindDir, Mode: fs.ModeDevice | 0o755}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := fileE("ok", 1)
			for _, flags := range []uint64{0, wire.FlagFinal} {
				p := wire.EncodeManifest(&wire.BatchManifest{ID: 7, Flags: flags, Entries: []model.Entry{ok, tc.e}})
				m, err := wire.DecodeManifest(p)
				if err == nil {
					t.Fatalf("decoded %+v", m.Entries)
				}
				if !errors.Is(err, wire.ErrProtocol) || !mentions(err.Error(), tc.e.Path) {
					t.Errorf("error %q: want a protocol error naming %q", err, tc.e.Path)
				}
			}
		})
	}
	// Out-of-range numbers (a mode above 32 bits, a negative size).
	for _, tc := range []struct {
		name string
		e    model.Entry
	}{
		{"negative size", model.Entry{Path: "neg", Kind: model.KindFile, Size: -1}},
	} {
		_, err := wire.DecodeManifest(wire.EncodeManifest(&wire.BatchManifest{Entries: []model.Entry{tc.e}}))
		if err == nil || !mentions(err.Error(), tc.e.Path) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.e.Path)
		}
	}
}

// A setuid or setgid file loses the bit unless KeepSetid.
func TestSetid(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			s := newSandbox(t)
			r := s.open(t, extract.Options{KeepSetid: keep})
			u := fileE("suid", 3)
			u.Mode = fs.ModeSetuid | 0o755
			g := fileE("sgid", 3)
			g.Mode = fs.ModeSetgid | 0o750
			k := fileE("sticky", 3)
			k.Mode = fs.ModeSticky | 0o755
			dir := dirE("sgdir", fs.ModeSetgid|0o775)
			m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{u, g, k}}
			mustReceive(t, r, m, tarOf(t, 1, tf("suid", "abc"), tf("sgid", "abc"), tf("sticky", "abc")))
			mustReceive(t, r, &wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: []model.Entry{dir}}, nil)
			want := map[string]fs.FileMode{
				"suid": 0o755, "sgid": 0o750, "sticky": fs.ModeSticky | 0o755, "sgdir": fs.ModeDir | 0o775,
			}
			if keep {
				want["suid"] |= fs.ModeSetuid
				want["sgid"] |= fs.ModeSetgid
				want["sgdir"] |= fs.ModeSetgid
			}
			for name, mode := range want {
				fi, err := os.Lstat(filepath.Join(s.root, name))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode() != mode {
					t.Errorf("%s: mode %v, want %v", name, fi.Mode(), mode)
				}
			}
			s.check(t)
		})
	}
}

// mustReceive receives and commits a batch that must succeed entirely.
func mustReceive(t testing.TB, r *extract.Receiver, m *wire.BatchManifest, data []byte) *wire.BatchAck {
	t.Helper()
	if data == nil {
		data = tarOf(t, m.ID)
	}
	txn, err := r.Receive(m, needFor(r, m), bytes.NewReader(data))
	if err != nil {
		t.Fatalf("batch %d: %v", m.ID, err)
	}
	ack := txn.Commit(m.ID, nil)
	for _, e := range ack.Errors {
		t.Errorf("batch %d: entry %q: %s", m.ID, m.Entries[e.Index].Path, e.Msg)
	}
	return ack
}

// checkDir checks that directory e is at root with its mode and mtime.
func checkDir(t testing.TB, root string, e model.Entry) {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(root, e.Path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != fs.ModeDir|e.Mode {
		t.Errorf("%s: mode %v, want %v", e.Path, fi.Mode(), fs.ModeDir|e.Mode)
	}
	if fi.ModTime().UnixNano() != e.MTime {
		t.Errorf("%s: mtime %d, want %d", e.Path, fi.ModTime().UnixNano(), e.MTime)
	}
}

func checkFile(t testing.TB, root string, e model.Entry, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(e.Path))
	fi, err := os.Lstat(p)
	if err != nil {
		t.Errorf("%q: %v", e.Path, err)
		return
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != e.Mode.Perm() {
		t.Errorf("%q: mode %v, want a regular file with %v", e.Path, fi.Mode(), e.Mode.Perm())
	}
	if got := fi.ModTime().UnixNano(); got != e.MTime {
		t.Errorf("%q: mtime %d, want %d", e.Path, got, e.MTime)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != content {
		t.Errorf("%q: content %q (%v), want %q", e.Path, b, err, content)
	}
}

// Files land with their content, mode and nanosecond mtime, whatever their
// names (long, PAX, non-UTF-8, newlines, spaces); the manifest, not the tar
// header, decides the metadata.
func TestFilesLand(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	c255 := strings.Repeat("c", 255)
	names := []string{
		"plain",
		"with space and\ttab",
		"new\nline",
		"caf\xe9-latin1",
		"\xff\xfe",
		"日本語",
		c255,
		"d/" + c255 + "/" + c255,
		strings.Repeat("long/", 30) + "name", // > 100 bytes: a PAX path
		"deep/a/b/c/d/e/f",
		"-dash",
		".hidden",
		"...",
		"x..y",
		"z",
	}
	var entries []model.Entry
	var files []tarFile
	for i, n := range names {
		e := fileE(n, 0)
		e.Mode = fs.FileMode(0o600 + i%3*0o44)
		e.MTime = mtime + int64(i)*1_000_000_007
		data := strings.Repeat(fmt.Sprint(i), i*100)
		e.Size = int64(len(data))
		entries = append(entries, e)
		// The tar header lies about mode and mtime: ignored.
		files = append(files, tarFile{name: n, data: data, size: -1, mode: 0o7777})
	}
	m := &wire.BatchManifest{ID: 1, Entries: entries}
	m, err := wire.DecodeManifest(wire.EncodeManifest(m))
	if err != nil {
		t.Fatal(err)
	}
	ack := mustReceive(t, r, m, tarOf(t, 1, files...))
	if ack.Files != int64(len(names)) {
		t.Errorf("ack counts %d files, want %d", ack.Files, len(names))
	}
	for i, e := range entries {
		checkFile(t, s.root, e, files[i].data)
	}
	s.check(t)
}

// A final batch applies directory metadata after the files: a 0555
// directory still receives its files, then gets 0555 and its mtime.
func TestDirMetadata(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	f := fileE("ro/sub/f", 3)
	mustReceive(t, r, &wire.BatchManifest{ID: 1, Entries: []model.Entry{f}}, tarOf(t, 1, tf("ro/sub/f", "abc")))
	g := fileE("ro/g", 2)
	mustReceive(t, r, &wire.BatchManifest{ID: 2, Entries: []model.Entry{g}}, tarOf(t, 2, tf("ro/g", "gg")))
	sub, ro, empty, top := dirE("ro/sub", 0o750), dirE("ro", 0o555), dirE("empty/dir", 0o700), dirE(".", 0o751)
	sub.MTime, ro.MTime, empty.MTime, top.MTime = mtime+1, mtime+2, mtime+3, mtime+4
	// Deepest first, as the sender orders them.
	ack := mustReceive(t, r, &wire.BatchManifest{ID: 3, Flags: wire.FlagFinal, Entries: []model.Entry{sub, empty, ro, top}}, nil)
	if ack.Files != 4 {
		t.Errorf("ack counts %d, want 4", ack.Files)
	}
	checkFile(t, s.root, f, "abc")
	checkFile(t, s.root, g, "gg")
	for _, d := range []model.Entry{sub, ro, empty, top} {
		checkDir(t, s.root, d)
	}
	s.check(t)
}

// Symlinks are created with their target verbatim (absolute ones too: they
// are only text to the receiver), replaced when the target changes, left
// alone when it does not.
func TestSymlinks(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	mustReceive(t, r, &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("a", 1), fileE("b", 1)}}, tarOf(t, 1, tf("a", "A"), tf("b", "B")))
	l1, abs, deep := symE("l", "a"), symE("abs", "/etc/passwd"), symE("x/y/l", "../../b")
	ack := mustReceive(t, r, &wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: []model.Entry{l1, abs, deep}}, nil)
	if ack.Files != 3 {
		t.Errorf("ack counts %d, want 3", ack.Files)
	}
	check := func(e model.Entry) {
		t.Helper()
		p := filepath.Join(s.root, e.Path)
		got, err := os.Readlink(p)
		if err != nil || got != e.Link {
			t.Errorf("%s -> %q (%v), want %q", e.Path, got, err, e.Link)
		}
		fi, err := os.Lstat(p)
		if err == nil && fi.ModTime().UnixNano() != e.MTime {
			t.Errorf("%s: mtime %d, want %d", e.Path, fi.ModTime().UnixNano(), e.MTime)
		}
	}
	check(l1)
	check(abs)
	check(deep)
	// Replaced, and left alone.
	l2 := symE("l", "b")
	ack = mustReceive(t, r, &wire.BatchManifest{ID: 3, Flags: wire.FlagFinal, Entries: []model.Entry{l2, abs}}, nil)
	if ack.Files != 1 || ack.Skipped != 1 {
		t.Errorf("ack: %d files %d skipped, want 1 and 1", ack.Files, ack.Skipped)
	}
	check(l2)
	check(abs)
	// A symlink replaces a file, and a file a symlink.
	mustReceive(t, r, &wire.BatchManifest{ID: 4, Flags: wire.FlagFinal, Entries: []model.Entry{symE("a", "b")}}, nil)
	check(symE("a", "b"))
	f := fileE("l", 3)
	mustReceive(t, r, &wire.BatchManifest{ID: 5, Entries: []model.Entry{f}}, tarOf(t, 5, tf("l", "new")))
	checkFile(t, s.root, f, "new")
	s.check(t)
}

// Hard links to files this receiver wrote, or verified with the quick check.
func TestHardlinks(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	f := fileE("f", 3)
	f.Nlink = 3
	mustReceive(t, r, &wire.BatchManifest{ID: 1, Entries: []model.Entry{f}}, tarOf(t, 1, tf("f", "abc")))
	ack := mustReceive(t, r, &wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: []model.Entry{hardE("h1", "f"), hardE("d/h2", "f")}}, nil)
	if ack.Files != 2 {
		t.Errorf("ack counts %d, want 2", ack.Files)
	}
	fi, _ := os.Stat(filepath.Join(s.root, "f"))
	for _, p := range []string{"h1", "d/h2"} {
		hi, err := os.Lstat(filepath.Join(s.root, p))
		if err != nil || !os.SameFile(fi, hi) {
			t.Errorf("%s is not a hard link to f (%v)", p, err)
		}
	}
	// Again: already linked, skipped.
	ack = mustReceive(t, r, &wire.BatchManifest{ID: 3, Flags: wire.FlagFinal, Entries: []model.Entry{hardE("h1", "f")}}, nil)
	if ack.Skipped != 1 {
		t.Errorf("relink: %+v, want one skipped", ack)
	}

	// A second run: the quick check verifies f, which may then be linked.
	r2 := s.open(t, extract.Options{})
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{f}}
	if need := r2.Need(m.Entries); need[0] {
		t.Fatalf("f is needed again")
	}
	mustReceive(t, r2, m, nil)
	mustReceive(t, r2, &wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: []model.Entry{hardE("h3", "f")}}, nil)
	if hi, err := os.Lstat(filepath.Join(s.root, "h3")); err != nil || !os.SameFile(fi, hi) {
		t.Errorf("h3 is not a hard link to f (%v)", err)
	}
	s.check(t)
}

// The quick check: not needed for a regular file of identical size and
// mtime, needed otherwise; other kinds are always needed.
func TestNeed(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	f := fileE("f", 3)
	mustReceive(t, r, &wire.BatchManifest{ID: 1, Entries: []model.Entry{f}}, tarOf(t, 1, tf("f", "abc")))
	if err := os.Symlink("f", filepath.Join(s.root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An identical file outside the root, behind a symlink.
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "x"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(elsewhere, "x"), time.Unix(0, mtime), time.Unix(0, mtime))
	if err := os.Symlink(elsewhere, filepath.Join(s.root, "out")); err != nil {
		t.Fatal(err)
	}

	bigger, newer, older := f, f, f
	bigger.Size, newer.MTime, older.MTime = 4, mtime+1, mtime-1000
	asLink := fileE("link", 3) // a symlink to an identical file is not that file
	asDir := fileE("dir", 3)
	viaOut := fileE("out/x", 3) // identical, but outside: never looked at
	bad := fileE("../outside/x", 3)
	cases := []struct {
		e    model.Entry
		want bool
	}{
		{f, false}, {bigger, true}, {newer, true}, {older, true},
		{fileE("missing", 3), true}, {asLink, true}, {asDir, true}, {viaOut, true}, {bad, true},
		{dirE("dir", 0o755), true}, {symE("link", "f"), true}, {hardE("h", "f"), true},
	}
	var entries []model.Entry
	for _, c := range cases {
		entries = append(entries, c.e)
	}
	need := r.Need(entries)
	for i, c := range cases {
		if need[i] != c.want {
			t.Errorf("Need(%s %q size %d mtime %d) = %v, want %v", c.e.Kind, c.e.Path, c.e.Size, c.e.MTime, need[i], c.want)
		}
	}
	if need := s.open(t, extract.Options{NoCheck: true}).Need([]model.Entry{f}); !need[0] {
		t.Errorf("with NoCheck an identical file is not needed")
	}
	// A file the sender's resume journal names is checked even with
	// NoCheck: left out only where DEST holds it as sent.
	resumed := []model.Entry{f, bigger, older, fileE("missing", 3)}
	for i := range resumed {
		resumed[i].Resumed = true
	}
	if need := s.open(t, extract.Options{NoCheck: true}).Need(resumed); !reflect.DeepEqual(need, []bool{false, true, true, true}) {
		t.Errorf("with NoCheck, files the journal names: need %v, want [false true true true] (same, bigger, older, missing)", need)
	}
	// Skipped files are counted, not rewritten.
	txn, err := r.Receive(&wire.BatchManifest{ID: 2, Entries: []model.Entry{f}}, []bool{false}, bytes.NewReader(tarOf(t, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if ack := txn.Commit(2, nil); ack.Skipped != 1 || ack.Files != 0 {
		t.Errorf("ack %+v, want 1 skipped", ack)
	}
	s.check(t)
}

// Files the sender discards in Commit never appear under their final name,
// and an old version stays in place.
func TestDiscard(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	old := fileE("keep", 3)
	mustReceive(t, r, &wire.BatchManifest{ID: 1, Entries: []model.Entry{old}}, tarOf(t, 1, tf("keep", "old")))

	changed := fileE("keep", 3)
	changed.MTime++
	entries := []model.Entry{fileE("a", 1), fileE("d/b", 1), changed, fileE("c", 1)}
	m := &wire.BatchManifest{ID: 2, Entries: entries}
	txn, err := r.Receive(m, needFor(r, m), bytes.NewReader(tarOf(t, 2, tf("a", "A"), tf("d/b", "B"), tf("keep", "new"), tf("c", "C"))))
	if err != nil {
		t.Fatal(err)
	}
	ack := txn.Commit(2, []wire.Discard{{Index: 1, Reason: "changed"}, {Index: 2, Reason: "changed"}})
	if ack.Files != 2 || len(ack.Errors) != 0 {
		t.Errorf("ack %+v, want 2 files and no errors", ack)
	}
	for _, p := range []string{"d/b"} {
		if _, err := os.Lstat(filepath.Join(s.root, p)); err == nil {
			t.Errorf("discarded %q exists", p)
		}
	}
	checkFile(t, s.root, old, "old")
	checkFile(t, s.root, entries[0], "A")
	checkFile(t, s.root, entries[3], "C")
	s.check(t)

	// Abort leaves nothing either.
	m = &wire.BatchManifest{ID: 3, Entries: []model.Entry{fileE("x", 1), fileE("y/z", 1)}}
	txn, err = r.Receive(m, needFor(r, m), bytes.NewReader(tarOf(t, 3, tf("x", "X"), tf("y/z", "Z"))))
	if err != nil {
		t.Fatal(err)
	}
	txn.Abort()
	for _, p := range []string{"x", "y/z"} {
		if _, err := os.Lstat(filepath.Join(s.root, p)); err == nil {
			t.Errorf("aborted %q exists", p)
		}
	}
	s.check(t)
}

// Two streams racing on one root with a symlink planted on one of them:
// whatever the interleaving, nothing lands outside.
func TestTwoStreamsInterleaved(t *testing.T) {
	s := newSandbox(t)
	a, b := s.open(t, extract.Options{}), s.open(t, extract.Options{})
	// b writes evil/x to a temporary name (the directory is created now)...
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("evil/x", 3)}}
	txn, err := b.Receive(m, needFor(b, m), bytes.NewReader(tarOf(t, 1, tf("evil/x", "abc"))))
	if err != nil {
		t.Fatal(err)
	}
	// ...a tries to put a symlink in place of the directory...
	fm := &wire.BatchManifest{ID: 1, Flags: wire.FlagFinal, Entries: []model.Entry{symE("evil", s.outside)}}
	ftxn, err := a.Receive(fm, needFor(a, fm), bytes.NewReader(tarOf(t, 1)))
	if err != nil {
		t.Fatal(err)
	}
	fack := ftxn.Commit(1, nil)
	if len(fack.Errors) != 1 || !mentions(fack.Errors[0].Msg, "evil") {
		t.Errorf("symlink over a directory: %+v", fack)
	}
	// ...and b commits.
	if ack := txn.Commit(1, nil); ack.Files != 1 {
		t.Errorf("ack %+v", ack)
	}
	checkFile(t, s.root, m.Entries[0], "abc")
	s.check(t)
}

// Several receivers in one process on one root (K agents served in one
// process, as the tests of packages send and receive do): their temporary names
// must not collide, or a file fails with "file exists".
func TestTwoReceiversTempNames(t *testing.T) {
	s := newSandbox(t)
	a, b := s.open(t, extract.Options{}), s.open(t, extract.Options{})
	var txns []*extract.Txn
	var ms []*wire.BatchManifest
	for i, r := range []*extract.Receiver{a, b, a, b} {
		id := uint64(i + 1)
		name := fmt.Sprintf("d/f%d", id)
		m := &wire.BatchManifest{ID: id, Entries: []model.Entry{fileE(name, 1)}}
		// Received, not yet committed: the temporary files coexist.
		txn, err := r.Receive(m, needFor(r, m), bytes.NewReader(tarOf(t, id, tf(name, "x"))))
		if err != nil {
			t.Fatal(err)
		}
		txns, ms = append(txns, txn), append(ms, m)
	}
	for i, txn := range txns {
		ack := txn.Commit(ms[i].ID, nil)
		if ack.Files != 1 || len(ack.Errors) != 0 {
			t.Errorf("batch %d: %+v", ms[i].ID, ack)
		}
	}
	s.check(t)
}

// TestOwnerAndMode: as root, with owners kept, each file ends with its
// owner and its exact mode: a setuid or setgid bit, which a chown clears,
// is set after it; a mode the create already gave stays.
func TestOwnerAndMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	s := newSandbox(t)
	r := s.open(t, extract.Options{Owner: true, KeepSetid: true})
	modes := map[string]fs.FileMode{
		"plain": 0o644, "private": 0o600, "suid": fs.ModeSetuid | 0o755, "sgid": fs.ModeSetgid | 0o750,
	}
	var entries []model.Entry
	var files []tarFile
	for _, name := range []string{"plain", "private", "suid", "sgid"} {
		e := fileE("new/"+name, 3)
		e.Mode, e.UID, e.GID = modes[name], 1234, 5678
		entries = append(entries, e)
		files = append(files, tf("new/"+name, "abc"))
	}
	mustReceive(t, r, &wire.BatchManifest{ID: 1, Entries: entries}, tarOf(t, 1, files...))
	for name, mode := range modes {
		fi, err := os.Lstat(filepath.Join(s.root, "new", name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != mode || st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("%s: mode %v owner %d:%d, want %v 1234:5678", name, fi.Mode(), st.Uid, st.Gid, mode)
		}
	}
}
