package extract_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// Late ranges: a stream cut while it carried a range of a split file may
// still be applying that range when the range, sent again on another
// stream, has completed the file. Whatever the order, the file stays as the
// sender's, its range is acknowledged without an error, and no partial is
// left at the destination.

// A range delivered again after its file was completed, under
// --no-quick-check (where Need asks for every range): it begins no partial.
func TestRangeLateNoCheck(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{NoCheck: true})
	const size = 300_000
	content, es := splitFile("d/f", size, 100_000)
	for k, e := range es {
		landRange(t, r, uint64(k+1), content, e)
	}
	// Its stream's manifest was answered before the file landed.
	rangesAgain(t, r, s.root, 10, content, es...)
	// Answered now, the receiver asks for none of them.
	for k, n := range r.Need(es) {
		if n {
			t.Errorf("range %d asked for again after this receiver completed its file", k)
		}
	}
	// Another receiver (another job) sends the file again, as the mode
	// says.
	r2 := s.open(t, extract.Options{NoCheck: true})
	for k, n := range r2.Need(es) {
		if !n {
			t.Errorf("a new job under --no-quick-check: range %d not asked for", k)
		}
	}
	checkFile(t, s.root, fileE("d/f", size), string(content))
	s.check(t)
}

// A range still being written into its partial when another copy of it
// completes the file writes its last bytes into the file in place: it must
// leave the file's mtime as the sender's, whether its batch commits or is
// cut short, so that a later copy of a range finds the file complete and
// begins no partial.
func TestRangeLateWriteIntoPlacedFile(t *testing.T) {
	for _, cut := range []bool{false, true} {
		t.Run(map[bool]string{false: "committed", true: "cut"}[cut], func(t *testing.T) {
			s := newSandbox(t)
			r := s.open(t, extract.Options{})
			const half = 1 << 20 // above bodyMax: written as it arrives
			const size = 2 * half
			content, es := splitFile("f", size, half)
			landRange(t, r, 1, content, es[0])
			// The slow copy of range 1: its data come through a pipe.
			pr, pw := io.Pipe()
			type result struct {
				txn *extract.Txn
				err error
			}
			done := make(chan result, 1)
			go func() {
				txn, err := r.Receive(&wire.BatchManifest{ID: 2, Entries: es[1:]}, []bool{true}, pr)
				done <- result{txn, err}
			}()
			whole := rangeTar(t, 2, content, "", es[1])
			dataAt := bytes.Index(whole, content[half:half+4096])
			if dataAt < 0 {
				t.Fatal("range data not found in its tar stream")
			}
			go pw.Write(whole[:dataAt+half/2])
			part := waitPartialHolds(t, s.root, content, half, 4096)
			// Another copy of range 1 completes the file.
			if ack := sendRange(t, r, 3, content, es[1]); len(ack.Errors) != 0 || ack.Files != 1 {
				t.Fatalf("the second copy: %+v", ack)
			}
			if _, err := os.Lstat(part); err == nil {
				t.Fatal("the partial is still there after its file was completed")
			}
			// The slow copy goes on into what is now the file.
			time.Sleep(20 * time.Millisecond) // a later mtime than the completion's, where the clock is coarse
			var res result
			if cut {
				pw.Write(whole[dataAt+half/2 : dataAt+half*3/4])
				pw.CloseWithError(io.ErrUnexpectedEOF)
				if res = <-done; res.err == nil {
					t.Fatal("a cut batch was received whole")
				}
			} else {
				pw.Write(whole[dataAt+half/2:])
				pw.Close()
				if res = <-done; res.err != nil {
					t.Fatal(res.err)
				}
				if ack := res.txn.Commit(2, nil); len(ack.Errors) != 0 || ack.Files != 0 {
					t.Fatalf("the slow copy: %+v", ack)
				}
			}
			checkFile(t, s.root, fileE("f", size), string(content))
			// A third copy of a range (a stream given it again, its manifest
			// answered before the file landed) begins no partial.
			rangesAgain(t, r, s.root, 4, content, es...)
			checkFile(t, s.root, fileE("f", size), string(content))
			s.check(t)
		})
	}
}

// rangesAgain delivers each of es again on r, in batches numbered from
// id, as a stream does whose manifest was answered before the file
// landed: each is acknowledged with no error and no file, and leaves no
// partial under root.
func rangesAgain(t *testing.T, r *extract.Receiver, root string, id uint64, content []byte, es ...model.Entry) {
	t.Helper()
	for k, e := range es {
		txn := r.Begin([]model.Entry{e})
		txn.Write(0, bytes.NewReader(content[e.Off:e.Off+e.Len]))
		if ack := txn.Commit(id+uint64(k), nil); len(ack.Errors) != 0 || ack.Files != 0 {
			t.Errorf("range %d again: %+v", k, ack)
		}
		if p := partials(t, root); len(p) != 0 {
			t.Fatalf("range %d again after its file was completed: partial left: %v", k, p)
		}
	}
}

// waitPartialHolds waits until the one partial under root holds content's
// n bytes at off (a writer got that far into it), and returns its path.
func waitPartialHolds(t *testing.T, root string, content []byte, off, n int64) string {
	t.Helper()
	want := content[off : off+n]
	got := make([]byte, n)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		ps := partials(t, root)
		if len(ps) != 1 {
			continue
		}
		f, err := os.Open(ps[0])
		if err != nil {
			continue
		}
		m, _ := f.ReadAt(got, off)
		f.Close()
		if int64(m) == n && bytes.Equal(got, want) {
			return ps[0]
		}
	}
	t.Fatalf("no partial under %s came to hold the range at %d", root, off)
	return ""
}

// A range whose partial was completed by another copy between its open and
// its lock (the reverse race, driven here by holding the partial's lock
// as a completing writer does): it is acknowledged as landed, not failed,
// and nothing is left behind.
func TestRangeLateWhileCompleting(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	const size = 200_000
	content, es := splitFile("f", size, 100_000)
	landRange(t, r, 1, content, es[0])
	parts := partials(t, s.root)
	if len(parts) != 1 {
		t.Fatalf("partials: %v", parts)
	}
	// Another process completes the file: it locks the partial, writes the
	// last range and its record, gives it its name. Meanwhile a copy of
	// range 0 opens the partial and waits for its lock.
	f, err := os.OpenFile(parts[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockEx(f); err != nil {
		t.Fatal(err)
	}
	late := make(chan *wire.BatchAck, 1)
	go func() {
		txn := r.Begin(es[:1])
		txn.Write(0, bytes.NewReader(content[:100_000]))
		late <- txn.Commit(3, nil)
	}()
	time.Sleep(100 * time.Millisecond) // the late copy opens the partial and waits for its lock
	f.WriteAt(content[100_000:], 100_000)
	f.Truncate(size)
	os.Chtimes(parts[0], time.Unix(0, mtime), time.Unix(0, mtime))
	f.Chmod(0o644)
	if err := os.Rename(parts[0], filepath.Join(s.root, "f")); err != nil {
		t.Fatal(err)
	}
	f.Close() // the lock goes with it
	if ack := <-late; len(ack.Errors) != 0 || ack.Files != 0 {
		t.Fatalf("the late copy: %+v", ack)
	}
	checkFile(t, s.root, fileE("f", size), string(content))
	s.check(t)
}

// lockEx takes the exclusive lock of a partial, as its writers do.
func lockEx(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX) }
