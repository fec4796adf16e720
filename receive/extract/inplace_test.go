package extract_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// TestInPlaceOnlyInNewDirectories: in a directory the receiver made, a
// new file is written under its final name (as tar -x writes it), so it is
// there before the commit; in one that existed, it lands only at the
// commit. Either way each ends with its content, mode and mtime, and no
// temporary is left.
func TestInPlaceOnlyInNewDirectories(t *testing.T) {
	s := newSandbox(t)
	if err := os.Mkdir(filepath.Join(s.root, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := s.open(t, extract.Options{})
	entries := []model.Entry{fileE("new/a", 5), fileE("old/b", 5), fileE("new/deeper/c", 5)}
	entries[0].Mode = 0o600
	tx := r.Begin(entries)
	for i, body := range []string{"aaaaa", "bbbbb", "ccccc"} {
		if err := tx.Write(i, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		p     string
		there bool
	}{{"new/a", true}, {"new/deeper/c", true}, {"old/b", false}} {
		if _, err := os.Lstat(filepath.Join(s.root, c.p)); (err == nil) != c.there {
			t.Errorf("%s before the commit: %v; want there: %v", c.p, err, c.there)
		}
	}
	if ack := tx.Commit(1, nil); len(ack.Errors) != 0 || ack.Files != 3 {
		t.Fatalf("ack: %d files, %v", ack.Files, ack.Errors)
	}
	for i, want := range []string{"aaaaa", "bbbbb", "ccccc"} {
		p := filepath.Join(s.root, entries[i].Path)
		got, err := os.ReadFile(p)
		fi, serr := os.Stat(p)
		if err != nil || serr != nil || string(got) != want || fi.Mode().Perm() != entries[i].Mode.Perm() || fi.ModTime().UnixNano() != mtime {
			t.Errorf("%s: %q %v, %v", entries[i].Path, got, err, fi)
		}
	}
	s.check(t)
}

// TestInPlaceFailures: a file written under its final name in a new
// directory is removed again when its data does not hash to the sender's,
// when the sender discards it, and when the batch is aborted; a file that
// appeared meanwhile under that name is replaced, not written into.
func TestInPlaceFailures(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	entries := []model.Entry{fileE("new/ok", 2), fileE("new/corrupt", 2), fileE("new/discarded", 2)}
	tx := r.Begin(entries)
	for i := range entries {
		if err := tx.Write(i, strings.NewReader("xy")); err != nil {
			t.Fatal(err)
		}
	}
	bad := wire.IndexedSum{Index: 1} // not the hash of "xy"
	ack := tx.CommitSums(1, []wire.Discard{{Index: 2, Reason: "the source changed"}}, []wire.IndexedSum{bad})
	if ack.Files != 1 || len(ack.Errors) != 1 || ack.Errors[0].Code != wire.CodeCorrupt {
		t.Fatalf("ack: %d files, errors %+v", ack.Files, ack.Errors)
	}
	for _, p := range []string{"new/corrupt", "new/discarded"} {
		if _, err := os.Lstat(filepath.Join(s.root, p)); err == nil {
			t.Errorf("%s is there", p)
		}
	}

	// Aborted: gone.
	tx = r.Begin([]model.Entry{fileE("new/aborted", 2)})
	if err := tx.Write(0, strings.NewReader("zz")); err != nil {
		t.Fatal(err)
	}
	tx.Abort()
	if _, err := os.Lstat(filepath.Join(s.root, "new/aborted")); err == nil {
		t.Error("an aborted batch's file is there")
	}

	// Someone else's file under the name: replaced whole.
	other := filepath.Join(s.root, "new/taken")
	if err := os.WriteFile(other, []byte("someone else's longer content"), 0o644); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Lstat(other)
	tx = r.Begin([]model.Entry{fileE("new/taken", 4)})
	if err := tx.Write(0, strings.NewReader("ours")); err != nil {
		t.Fatal(err)
	}
	if ack := tx.Commit(2, nil); len(ack.Errors) != 0 {
		t.Fatal(ack.Errors)
	}
	got, _ := os.ReadFile(other)
	now, _ := os.Lstat(other)
	if string(got) != "ours" || os.SameFile(old, now) {
		t.Errorf("new/taken: %q, the same inode: %v", got, os.SameFile(old, now))
	}
	s.check(t)
}

// TestNoInPlaceWithFsync: with --fsync a new file takes its name only once
// its data is durable, even in a directory the receiver made.
func TestNoInPlaceWithFsync(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{Fsync: true})
	tx := r.Begin([]model.Entry{fileE("new/a", 5)})
	if err := tx.Write(0, strings.NewReader("aaaaa")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(s.root, "new/a")); err == nil {
		t.Error("new/a is under its name before the commit")
	}
	if ack := tx.Commit(1, nil); len(ack.Errors) != 0 || ack.Files != 1 {
		t.Fatalf("ack: %d files, %v", ack.Files, ack.Errors)
	}
	if got, err := os.ReadFile(filepath.Join(s.root, "new/a")); err != nil || string(got) != "aaaaa" {
		t.Errorf("new/a: %q, %v", got, err)
	}
	s.check(t)
}

// TestInPlaceDropSparesReplacement: a file written under its final name
// that is given up (its batch aborted, its data not the sender's, its
// stream failing under its write) is removed only while its name still
// holds it: a copy put in its place meanwhile (a second run's, whose
// sender found the half-written file, while this receiver, its own sender
// gone, winds down) stays.
func TestInPlaceDropSparesReplacement(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	replace := func(p string) {
		t.Helper()
		full := filepath.Join(s.root, p)
		if err := os.WriteFile(full+".other", []byte("the other run's"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(full+".other", full); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(p string) {
		t.Helper()
		if got, err := os.ReadFile(filepath.Join(s.root, p)); err != nil || string(got) != "the other run's" {
			t.Errorf("%s: %q, %v; want the copy put in its place", p, got, err)
		}
	}

	tx := r.Begin([]model.Entry{fileE("new/aborted", 2)})
	if err := tx.Write(0, strings.NewReader("zz")); err != nil {
		t.Fatal(err)
	}
	replace("new/aborted")
	tx.Abort()
	kept("new/aborted")

	tx = r.Begin([]model.Entry{fileE("new/corrupt", 2)})
	if err := tx.Write(0, strings.NewReader("xy")); err != nil {
		t.Fatal(err)
	}
	replace("new/corrupt")
	if ack := tx.CommitSums(1, nil, []wire.IndexedSum{{Index: 0}}); len(ack.Errors) != 1 {
		t.Fatalf("ack: %+v", ack.Errors)
	}
	kept("new/corrupt")

	tx = r.Begin([]model.Entry{fileE("new/cut", 4)})
	cut := &cutReader{data: "ab", then: func() { replace("new/cut") }}
	if err := tx.Write(0, cut); err == nil {
		t.Fatal("a stream cut under the write: no error")
	}
	tx.Abort()
	kept("new/cut")
}

// cutReader yields data, then calls then and fails.
type cutReader struct {
	data string
	then func()
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.data != "" {
		n := copy(p, c.data)
		c.data = c.data[n:]
		return n, nil
	}
	c.then()
	return 0, io.ErrUnexpectedEOF
}

// TestInPlaceDescriptorsReleased: a file written under its final name
// keeps its descriptor only until its batch settles (which spares asking
// it for its inode): committed, aborted, discarded or failing its hash,
// none is left open, and none is open before the batch is written either.
func TestInPlaceDescriptorsReleased(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	before := openFDs(t)
	for _, end := range []string{"commit", "abort", "discard and corrupt"} {
		entries := []model.Entry{fileE("new/"+end+"/a", 2), fileE("new/"+end+"/b", 2), fileE("new/"+end+"/c", 2)}
		tx := r.Begin(entries)
		for i := range entries {
			if err := tx.Write(i, strings.NewReader("xy")); err != nil {
				t.Fatal(err)
			}
		}
		switch end {
		case "commit":
			if ack := tx.Commit(1, nil); ack.Files != 3 || len(ack.Errors) != 0 {
				t.Fatalf("ack: %d files, %+v", ack.Files, ack.Errors)
			}
		case "abort":
			tx.Abort()
		default:
			ack := tx.CommitSums(1, []wire.Discard{{Index: 0, Reason: "the source changed"}}, []wire.IndexedSum{{Index: 1}})
			if ack.Files != 1 || len(ack.Errors) != 1 {
				t.Fatalf("ack: %d files, %+v", ack.Files, ack.Errors)
			}
		}
		if n := openFDs(t); n != before {
			t.Errorf("after %s: %d descriptors open, %d before the batch", end, n, before)
		}
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(fds)
}

// TestInPlaceNotUpToDateUntilSettled: a file written under its final name
// is there, whole, with its size, before its batch commits; a
// stream cut or stalled gives that batch up and another stream sends it
// again. The quick check must not take the first copy for up to date: if
// it did, the batch sent again would skip the file, and the first batch's
// abort would then remove the only copy.
func TestInPlaceNotUpToDateUntilSettled(t *testing.T) {
	// The same race between two receivers on one DEST (two agents, two
	// jobs): the other cannot know what this one has not settled, so a
	// file written under its final name shows its mtime only once its
	// batch commits.
	for _, c := range []struct {
		name    string
		another bool
	}{{"the same receiver", false}, {"another receiver on the same DEST", true}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			r := s.open(t, extract.Options{})
			other := r
			if c.another {
				other = s.open(t, extract.Options{})
			}
			entries := []model.Entry{fileE("new/a", 5), fileE("new/b", 5)}
			first := r.Begin(entries)
			for i, body := range []string{"aaaaa", "bbbbb"} {
				if err := first.Write(i, strings.NewReader(body)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Lstat(filepath.Join(s.root, "new/a")); err != nil {
				t.Fatalf("new/a is not under its name before the commit: %v", err)
			}
			// The batch again, as another stream (or job) sends it: what
			// its check asks for, it writes.
			need := other.Need(entries)
			again := other.Begin(entries)
			for i, body := range []string{"aaaaa", "bbbbb"} {
				if !need[i] {
					again.Skip(i)
					t.Errorf("%s, written by a batch not yet settled, taken for up to date", entries[i].Path)
					continue
				}
				if err := again.Write(i, strings.NewReader(body)); err != nil {
					t.Fatal(err)
				}
			}
			if ack := again.Commit(2, nil); len(ack.Errors) != 0 {
				t.Fatalf("ack: %v", ack.Errors)
			}
			first.Abort()
			for i, want := range []string{"aaaaa", "bbbbb"} {
				if got, err := os.ReadFile(filepath.Join(s.root, entries[i].Path)); err != nil || string(got) != want {
					t.Errorf("%s after the first batch was given up: %q, %v", entries[i].Path, got, err)
				}
			}
			// Settled, a file is up to date again.
			if need := r.Need(entries); need[0] || need[1] {
				t.Errorf("after the commit, the check asks for %v", need)
			}
			s.check(t)
		})
	}
}

// TestInPlaceMtimeAtCommit: a file written under its final name gets its
// mtime when its batch commits, and keeps it.
func TestInPlaceMtimeAtCommit(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	entries := []model.Entry{fileE("new/a", 5)}
	txn := r.Begin(entries)
	if err := txn.Write(0, strings.NewReader("aaaaa")); err != nil {
		t.Fatal(err)
	}
	if ack := txn.Commit(1, nil); len(ack.Errors) != 0 || ack.Files != 1 {
		t.Fatalf("ack: %d files, %v", ack.Files, ack.Errors)
	}
	st, err := os.Lstat(filepath.Join(s.root, "new/a"))
	if err != nil || st.ModTime().UnixNano() != entries[0].MTime {
		t.Fatalf("new/a: mtime %v (%v), want %v", st.ModTime(), err, entries[0].ModTime())
	}
	s.check(t)
}
