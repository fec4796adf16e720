package extract

import (
	"github.com/bulkmove/bulkmove/internal/dirat"

	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
	"golang.org/x/sys/unix"
)

// TestStagedLinkModes: a staged file reaches its name whichever way the
// kernel lets it be linked (from its held descriptor with AT_EMPTY_PATH,
// through /proc, or by its staged name), a file already there is replaced,
// a discarded one never lands, and no staged name or held descriptor is
// left behind.
func TestStagedLinkModes(t *testing.T) {
	modes := map[string]int32{"probe": 0, "proc": linkProc, "by-name": noFDLink}
	if os.Geteuid() == 0 {
		modes["empty-path"] = linkEmptyPath
	}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "old"), []byte("old content"), 0o644); err != nil {
				t.Fatal(err)
			}
			mkdirs(t, dir, "d0", "d1", "d2") // not the receiver's own: there it writes in place
			r, err := Open(dir, Options{NamedTemps: true, IOConcurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			r.staging.fdLink.Store(mode)
			held := tmpfilesOpen.Load()
			var entries []model.Entry
			for i := range 12 {
				entries = append(entries, model.Entry{Path: fmt.Sprintf("d%d/f%d", i%3, i), Kind: model.KindFile, Mode: 0o644, MTime: 1_700_000_000_000_000_000})
			}
			entries = append(entries, model.Entry{Path: "old", Kind: model.KindFile, Mode: 0o600, MTime: 1_700_000_000_000_000_000})
			for i := range entries {
				entries[i].Size = int64(len(entries[i].Path))
			}
			txn := r.Begin(entries)
			for i, e := range entries {
				if err := txn.Write(i, strings.NewReader(e.Path)); err != nil {
					t.Fatal(err)
				}
			}
			staged := 0
			for _, p := range txn.pending {
				if p.sdir != 0 {
					staged++
				}
				if (p.held >= 0) != (mode != noFDLink) {
					t.Errorf("%s: held descriptor %d", entries[p.index].Path, p.held)
				}
			}
			if staged != len(entries) {
				t.Fatalf("%d of %d files staged", staged, len(entries))
			}
			ack := txn.Commit(1, nil)
			if len(ack.Errors) != 0 || ack.Files != int64(len(entries)) {
				t.Fatalf("ack: %d files, errors %v", ack.Files, ack.Errors)
			}
			for _, e := range entries {
				got, err := os.ReadFile(filepath.Join(dir, e.Path))
				if err != nil || string(got) != e.Path {
					t.Errorf("%s: %q, %v", e.Path, got, err)
				}
				if fi, err := os.Stat(filepath.Join(dir, e.Path)); err == nil && (fi.Mode().Perm() != e.Mode.Perm() || fi.ModTime().UnixNano() != e.MTime) {
					t.Errorf("%s: mode %v, mtime %d", e.Path, fi.Mode(), fi.ModTime().UnixNano())
				}
			}
			if mode == 0 && r.staging.fdLink.Load() == 0 {
				t.Errorf("no way of linking was settled on")
			}

			// A discarded file and an aborted batch leave nothing.
			more := []model.Entry{{Path: "d0/gone", Kind: model.KindFile, Mode: 0o644, Size: 4}, {Path: "d1/aborted", Kind: model.KindFile, Mode: 0o644, Size: 4}}
			txn = r.Begin(more[:1])
			txn.Write(0, strings.NewReader("gone"))
			txn.Commit(2, []wire.Discard{{Index: 0, Reason: "changed"}})
			txn = r.Begin(more[1:])
			txn.Write(0, strings.NewReader("abrt"))
			txn.Abort()
			for _, e := range more {
				if _, err := os.Lstat(filepath.Join(dir, e.Path)); err == nil {
					t.Errorf("%s landed", e.Path)
				}
			}
			if n := tmpfilesOpen.Load(); n != held {
				t.Errorf("%d descriptors still held", n-held)
			}
			left := 0
			filepath.WalkDir(filepath.Join(dir, r.staging.name), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					left++
				}
				return nil
			})
			if left != 0 {
				t.Errorf("%d staged names left", left)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, TempPrefix+"*")); len(m) != 0 {
				t.Errorf("left behind: %q", m)
			}
		})
	}
}

// TestWriteThen: files that WriteThen is told to place land before Commit
// (many at once, several in one directory), those it is not are left to
// Commit, which drops the discarded; the ack counts them all.
func TestWriteThen(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named-temps=%v", named), func(t *testing.T) {
			dir := t.TempDir()
			mkdirs(t, dir, "d0", "d1", "d2") // not the receiver's own: there it writes in place
			r, err := Open(dir, Options{NamedTemps: named, IOConcurrency: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			held := tmpfilesOpen.Load()
			var entries []model.Entry
			for i := range 40 {
				p := fmt.Sprintf("d%d/f%02d", i%3, i)
				entries = append(entries, model.Entry{Path: p, Kind: model.KindFile, Mode: 0o640, Size: int64(len(p)), MTime: 1_700_000_000_000_000_000 + int64(i)})
			}
			keep := func(i int) bool { return i%5 != 0 } // the others: the source changed
			txn := r.Begin(entries)
			var wg sync.WaitGroup
			for i, e := range entries {
				wg.Go(func() {
					if err := txn.WriteThen(i, strings.NewReader(e.Path), func() bool { return keep(i) }); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			txn.placing.Wait()
			var discards []wire.Discard
			for i, e := range entries {
				_, err := os.Lstat(filepath.Join(dir, e.Path))
				if (err == nil) != keep(i) {
					t.Errorf("%s in place before the commit: %v", e.Path, err == nil)
				}
				if !keep(i) {
					discards = append(discards, wire.Discard{Index: i, Reason: "changed"})
				}
			}
			ack := txn.Commit(1, discards)
			if want := int64(len(entries) - len(discards)); len(ack.Errors) != 0 || ack.Files != want || ack.Bytes == 0 {
				t.Fatalf("ack: %d files (want %d), %d bytes, errors %v", ack.Files, want, ack.Bytes, ack.Errors)
			}
			for i, e := range entries {
				got, err := os.ReadFile(filepath.Join(dir, e.Path))
				switch {
				case keep(i) && (err != nil || string(got) != e.Path):
					t.Errorf("%s: %q, %v", e.Path, got, err)
				case !keep(i) && err == nil:
					t.Errorf("%s landed, though discarded", e.Path)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "d*", TempPrefix+"*")); len(left) != 0 {
				t.Errorf("temporaries left: %q", left)
			}
			if n := tmpfilesOpen.Load(); n != held {
				t.Errorf("%d descriptors held after the commit", n-held)
			}
		})
	}
}

// TestIndependentLinks: a run of hard links is applied at once only up to
// the first that depends on an earlier one of the run.
func TestIndependentLinks(t *testing.T) {
	hl := func(p, target string) model.Entry {
		return model.Entry{Path: p, Link: target, Kind: model.KindHardlink}
	}
	dir := model.Entry{Path: "d", Kind: model.KindDir}
	for _, c := range []struct {
		name    string
		entries []model.Entry
		want    int
	}{
		{"all independent", []model.Entry{hl("a", "t"), hl("b", "t"), hl("c", "u")}, 3},
		{"ends at a directory", []model.Entry{hl("a", "t"), hl("b", "u"), dir, hl("c", "v")}, 2},
		{"replaces an earlier target", []model.Entry{hl("a", "t"), hl("t", "u")}, 1},
		{"targets an earlier link", []model.Entry{hl("a", "t"), hl("b", "a")}, 1},
		{"same path twice", []model.Entry{hl("a", "t"), hl("c", "v"), hl("a", "u")}, 2},
		{"one alone", []model.Entry{hl("a", "t")}, 1},
	} {
		if got := independentLinks(c.entries, 0); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestStagingTwoReceivers: receivers of one process on one root (an agent
// serving several streams) each stage their files, in a directory of
// their own, and a staging directory removed under a receiver costs it
// nothing but the staging.
func TestStagingTwoReceivers(t *testing.T) {
	dir := t.TempDir()
	mkdirs(t, dir, "r0", "r1") // not the receivers' own: there they write in place
	var rs []*Receiver
	for range 2 {
		r, err := Open(dir, Options{NamedTemps: true, IOConcurrency: 4})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	for k, r := range rs {
		for round := range 2 {
			p := fmt.Sprintf("r%d/f%d", k, round)
			e := []model.Entry{{Path: p, Kind: model.KindFile, Mode: 0o644, Size: int64(len(p))}}
			txn := r.Begin(e)
			if err := txn.Write(0, strings.NewReader(p)); err != nil {
				t.Fatal(err)
			}
			if round == 0 && txn.pending[0].sdir == 0 {
				t.Errorf("receiver %d: not staged", k)
			}
			if ack := txn.Commit(1, nil); ack.Files != 1 {
				t.Fatalf("receiver %d: %+v", k, ack.Errors)
			}
			if round == 0 && k == 0 {
				os.RemoveAll(filepath.Join(dir, r.staging.name)) // under it
			}
		}
	}
	if rs[0].staging.name == rs[1].staging.name {
		t.Errorf("both receivers stage in %s", rs[0].staging.name)
	}
	for _, r := range rs {
		r.Close()
	}
	for k := range rs {
		for round := range 2 {
			p := fmt.Sprintf("r%d/f%d", k, round)
			if got, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(got) != p {
				t.Errorf("%s: %q, %v", p, got, err)
			}
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, TempPrefix+"*")); len(m) != 0 {
		t.Errorf("left behind: %q", m)
	}
}

// TestMadeByARace: when several of a receiver's writers make the same new
// directory at once, the receiver still knows it made it (so that it skips
// lookups there, and remembers the files it places there), whichever
// writer's mkdir won.
func TestMadeByARace(t *testing.T) {
	r, err := Open(t.TempDir(), Options{IOConcurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for k := range 200 {
		d := fmt.Sprintf("d%d", k)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := r.mkdirAll(d); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if !r.made(d) {
			t.Fatalf("%s: made by this receiver, but not known to be", d)
		}
	}
}

// mkdirs makes directories under dir.
func mkdirs(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCreateInPlaceOneAtATime: on a slow filesystem a file is created under
// its final name only while no other is being created in its directory
// (the others are staged), unless its batch is spread over many
// directories; on a fast one, always; never in a directory the receiver
// did not make.
func TestCreateInPlaceOneAtATime(t *testing.T) {
	for _, width := range []int{1, 8} {
		dir := t.TempDir()
		mkdirs(t, dir, "theirs")
		r, err := Open(dir, Options{NamedTemps: true, IOConcurrency: width})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.mkdirAll("ours"); err != nil {
			t.Fatal(err)
		}
		d, err := os.Open(filepath.Join(dir, "ours"))
		if err != nil {
			t.Fatal(err)
		}
		dfd := int(d.Fd())
		r.creating = map[string]bool{"ours": true} // another file's create under way
		fd := r.createInPlace(dirat.Calls{}, dfd, "ours/a", "a", 0o644, false)
		if busy := fd >= 0; busy != (width == 1) {
			t.Errorf("width %d: created in place beside another create: %v", width, busy)
		}
		if fd >= 0 {
			unix.Close(fd)
		}
		// A spread batch's file is created in place beside the others.
		if fd := r.createInPlace(dirat.Calls{}, dfd, "ours/s", "s", 0o644, true); fd < 0 {
			t.Errorf("width %d: a spread batch's file not created in place beside another create", width)
		} else {
			unix.Close(fd)
		}
		delete(r.creating, "ours")
		if fd := r.createInPlace(dirat.Calls{}, dfd, "ours/b", "b", 0o644, false); fd < 0 {
			t.Errorf("width %d: not created in place in the receiver's own directory", width)
		} else {
			unix.Close(fd)
		}
		if len(r.creating) != 0 {
			t.Errorf("width %d: still marked as creating: %v", width, r.creating)
		}
		g, _ := os.Open(filepath.Join(dir, "theirs"))
		if fd := r.createInPlace(dirat.Calls{}, int(g.Fd()), "theirs/c", "c", 0o644, true); fd >= 0 {
			unix.Close(fd)
			t.Errorf("width %d: created in place in a directory the receiver did not make", width)
		}
		g.Close()
		d.Close()
		r.Close()
	}
}

// TestSpreadBatch: a batch is spread when its files take their
// directories in turn; directories and symlinks do not count.
func TestSpreadBatch(t *testing.T) {
	file := func(p string) model.Entry { return model.Entry{Path: p, Kind: model.KindFile} }
	many := func(dir string, n int) []model.Entry {
		var es []model.Entry
		for i := range n {
			es = append(es, file(dir+"/f"+strconv.Itoa(i)))
		}
		return es
	}
	// inTurn: n files of each of dirs, one of each in turn.
	inTurn := func(dirs, n int) []model.Entry {
		var es []model.Entry
		for i := range n {
			for d := range dirs {
				es = append(es, file("d"+strconv.Itoa(d)+"/f"+strconv.Itoa(i)))
			}
		}
		return es
	}
	for _, c := range []struct {
		name    string
		entries []model.Entry
		want    bool
	}{
		{"one directory", many("a", 3), false},
		{"one file", many("a", 1), false},
		{"ten directories in turn", inTurn(10, 14), true},
		{"two directories in turn", inTurn(2, 50), true},
		{"ten directories one after the other", slices.Concat(many("a", 14), many("b", 14), many("c", 14)), false},
		{"in turn, then one directory's tail", slices.Concat(inTurn(4, 5), many("d0", 10)), false},
		{"top and one below", []model.Entry{file("x"), file("d/y")}, true},
		{"directories do not count", []model.Entry{file("x"), {Path: "d", Kind: model.KindDir}, file("y")}, false},
	} {
		if got := spread(c.entries); got != c.want {
			t.Errorf("%s: spread = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestByDir: the quick check takes a batch's files directory by directory
// (one open each), the directories in the order they come, each one's
// files in theirs, every file once.
func TestByDir(t *testing.T) {
	paths := func(es []model.Entry, order []int) string {
		var ps []string
		for _, i := range order {
			ps = append(ps, es[i].Path)
		}
		return strings.Join(ps, " ")
	}
	es := func(ps ...string) []model.Entry {
		var out []model.Entry
		for _, p := range ps {
			out = append(out, model.Entry{Path: p, Kind: model.KindFile})
		}
		return out
	}
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"a/1 a/2 a/3", "a/1 a/2 a/3"},
		{"a/1 b/1 c/1 a/2 b/2 c/2", "a/1 a/2 b/1 b/2 c/1 c/2"},
		{"x a/1 y b/c/1 a/2 z", "x y z a/1 a/2 b/c/1"},
	} {
		in := es(strings.Fields(c.in)...)
		if got := paths(in, byDir(in)); got != c.want {
			t.Errorf("byDir(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// TestMkdirAllMarksParentsMade: the directories the receiver makes on the
// way to one are known as its own (empty when made: their new files may
// be created in place), those it found are not, and a file in the way is
// an error.
func TestMkdirAllMarksParentsMade(t *testing.T) {
	dir := t.TempDir()
	mkdirs(t, dir, "x")
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, d := range []string{"a/b/c", "x/y/z"} {
		if err := r.mkdirAll(d); err != nil {
			t.Fatalf("mkdirAll(%s): %v", d, err)
		}
	}
	for d, want := range map[string]bool{"a": true, "a/b": true, "a/b/c": true, "x": false, "x/y": true, "x/y/z": true} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory (%v)", d, err)
		}
		if got := r.made(d); got != want {
			t.Errorf("made(%s) = %v, want %v", d, got, want)
		}
	}
	if err := r.mkdirAll("f/g"); err == nil {
		t.Error("mkdirAll(f/g) with a file f: no error")
	}
}
