package extract_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// canary is a name that must never appear in /etc: hostile cases that aim
// a symlink at /etc write a file of this name through it.
const canary = "bulkmove-test-canary-must-not-exist"

// sandbox is a destination root inside a parent directory, with a sentinel
// directory next to the parent:
//
//	base/parent/root   the receiver's root
//	base/outside       must stay empty and unchanged
//
// Anything that escapes the root lands in parent or outside (or /etc).
type sandbox struct {
	base, parent, root, outside string
	outsideStat                 fs.FileInfo
}

func newSandbox(tb testing.TB) *sandbox {
	tb.Helper()
	base := tb.TempDir()
	s := &sandbox{
		base:    base,
		parent:  filepath.Join(base, "parent"),
		root:    filepath.Join(base, "parent", "root"),
		outside: filepath.Join(base, "outside"),
	}
	for _, d := range []string{s.root, s.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	// An old mtime, so that a change by a hostile chtimes is visible.
	old := time.Unix(1_000_000_000, 123456789)
	if err := os.Chtimes(s.outside, old, old); err != nil {
		tb.Fatal(err)
	}
	fi, err := os.Lstat(s.outside)
	if err != nil {
		tb.Fatal(err)
	}
	s.outsideStat = fi
	// Registered after TempDir's own cleanup, so it runs first: hostile
	// modes (a 0000 directory) must not make the cleanup fail.
	tb.Cleanup(func() { makeWritable(base) })
	return s
}

// makeWritable gives the owner full access to every directory under dir.
func makeWritable(dir string) {
	os.Chmod(dir, 0o700)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Type().IsDir() {
			makeWritable(filepath.Join(dir, e.Name()))
		}
	}
}

func (s *sandbox) open(tb testing.TB, opt extract.Options) *extract.Receiver {
	tb.Helper()
	r, err := extract.Open(s.root, opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// violations lists every way the receiver got out of its root or left
// temporary files behind. Temporary-looking names that the manifests
// themselves asked for (legal, if odd) are listed in allowTemp.
func (s *sandbox) violations(allowTemp map[string]bool) []string {
	var bad []string
	makeWritable(s.root) // hostile directory modes must not hide anything
	ents, err := os.ReadDir(s.base)
	if err != nil {
		return []string{err.Error()}
	}
	for _, e := range ents {
		if e.Name() != "parent" && e.Name() != "outside" {
			bad = append(bad, "created next to the parent: "+e.Name())
		}
	}
	ents, err = os.ReadDir(s.parent)
	if err != nil {
		return append(bad, err.Error())
	}
	for _, e := range ents {
		if e.Name() != "root" {
			bad = append(bad, fmt.Sprintf("created in the parent: %q", e.Name()))
		} else if !e.IsDir() {
			bad = append(bad, "the root is no longer a directory")
		}
	}
	ents, err = os.ReadDir(s.outside)
	if err != nil {
		bad = append(bad, err.Error())
	}
	for _, e := range ents {
		bad = append(bad, fmt.Sprintf("created outside: %q", e.Name()))
	}
	if fi, err := os.Lstat(s.outside); err != nil {
		bad = append(bad, err.Error())
	} else if fi.Mode() != s.outsideStat.Mode() || !fi.ModTime().Equal(s.outsideStat.ModTime()) {
		bad = append(bad, fmt.Sprintf("outside dir changed: mode %v mtime %v, was %v %v",
			fi.Mode(), fi.ModTime(), s.outsideStat.Mode(), s.outsideStat.ModTime()))
	}
	if _, err := os.Lstat("/etc/" + canary); err == nil {
		bad = append(bad, "created /etc/"+canary)
		os.Remove("/etc/" + canary)
	}
	filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			bad = append(bad, err.Error())
			return nil
		}
		rel, _ := filepath.Rel(s.root, p)
		if strings.HasPrefix(d.Name(), extract.TempPrefix) && !allowTemp[filepath.ToSlash(rel)] {
			bad = append(bad, fmt.Sprintf("temporary file left: %q", rel))
		}
		return nil
	})
	return bad
}

func (s *sandbox) check(tb testing.TB) {
	tb.Helper()
	for _, v := range s.violations(nil) {
		tb.Error(v)
	}
}

// Entry constructors. Times are fixed, with nanoseconds.

var mtime = time.Date(2021, 3, 4, 5, 6, 7, 891011121, time.UTC).UnixNano()

func fileE(p string, size int64) model.Entry {
	return model.Entry{Path: p, Kind: model.KindFile, Mode: 0o644, Size: size, MTime: mtime, Nlink: 1}
}

func dirE(p string, mode fs.FileMode) model.Entry {
	return model.Entry{Path: p, Kind: model.KindDir, Mode: mode, MTime: mtime}
}

func symE(p, target string) model.Entry {
	return model.Entry{Path: p, Kind: model.KindSymlink, Mode: 0o777, MTime: mtime, Link: target}
}

func hardE(p, target string) model.Entry {
	return model.Entry{Path: p, Kind: model.KindHardlink, Mode: 0o644, MTime: mtime, Link: target}
}

// tarFile is one entry of a tar stream built with archive/tar.
type tarFile struct {
	name string
	data string
	size int64 // declared size; -1: len(data)
	typ  byte  // 0: TypeReg
	link string
	mode int64
}

func tf(name, data string) tarFile { return tarFile{name: name, data: data, size: -1} }

// tarOf writes a well-formed tar stream (batch header first, as the sender
// does) with archive/tar.
func tarOf(tb testing.TB, id uint64, files ...tarFile) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{wire.PAXBatch: strconv.FormatUint(id, 10)}}); err != nil {
		tb.Fatal(err)
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Typeflag: f.typ, Linkname: f.link, Mode: f.mode, Size: f.size, ModTime: time.Unix(0, mtime)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Size < 0 {
			h.Size = int64(len(f.data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatalf("tar header %q: %v", f.name, err)
		}
		if _, err := tw.Write([]byte(f.data)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Raw tar blocks, for headers archive/tar refuses to write.

func rawHeader(name string, typ byte, size int64) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	if size < 1<<33 {
		copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	} else { // base-256
		b[124] = 0x80
		for i := 135; i > 124; i-- {
			b[i] = byte(size)
			size >>= 8
		}
	}
	copy(b[136:148], fmt.Sprintf("%011o\x00", mtime/1e9))
	b[156] = typ
	copy(b[257:265], "ustar\x0000")
	for i := 148; i < 156; i++ {
		b[i] = ' '
	}
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func pad(data []byte) []byte {
	if n := len(data) % 512; n != 0 {
		data = append(data, make([]byte, 512-n)...)
	}
	return data
}

// rawEntry is a header and its (padded) data.
func rawEntry(name string, typ byte, data []byte) []byte {
	return append(rawHeader(name, typ, int64(len(data))), pad(slices.Clone(data))...)
}

func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3 // space, '=', newline
	size := n + len(strconv.Itoa(n))
	if len(strconv.Itoa(size)) > len(strconv.Itoa(n)) {
		size++
	}
	return fmt.Sprintf("%d %s=%s\n", size, k, v)
}

var tarEnd = make([]byte, 1024)

func rawTar(parts ...[]byte) []byte {
	return append(slices.Concat(parts...), tarEnd...)
}

// sparseTar is a GNU PAX 1.0 sparse file: it declares size bytes but
// carries only ten, the rest being a hole that the tar reader fills with
// zeros.
func sparseTar(name string, size int64) []byte {
	pax := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", name) + paxRecord("GNU.sparse.realsize", strconv.FormatInt(size, 10))
	smap := pad([]byte(fmt.Sprintf("1\n%d\n10\n", size-10)))
	data := append(smap, "0123456789"...)
	return rawTar(rawEntry("PaxHeaders/"+name, tar.TypeXHeader, []byte(pax)), rawEntry("GNUSparseFile.0/"+name, tar.TypeReg, data))
}

// needFor is the agent's answer to a manifest.
func needFor(r *extract.Receiver, m *wire.BatchManifest) []bool {
	if m.Flags&wire.FlagFinal != 0 {
		need := make([]bool, len(m.Entries))
		for i := range need {
			need[i] = true
		}
		return need
	}
	return r.NeedSums(m.Entries, m.Sums)
}
