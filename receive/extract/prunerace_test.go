package extract_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/receive/extract"
)

// TestPruneRaceSwappedDir: a local user at the destination swaps a
// directory above the one being pruned for a symlink, to another
// directory of the destination or to one outside it, in a tight loop
// while prune passes run. Nothing but the swapped directory's own entries
// may ever go, and a pass that meets the link says so with an error
// naming the directory.
func TestPruneRaceSwappedDir(t *testing.T) {
	const files = 100
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside") // a directory outside DEST
	names := make([]string, 0, files)
	for i := range files {
		names = append(names, fmt.Sprintf("sub/f%03d", i))
	}
	names = append(names, "sub/d/g1", "sub/d/g2")
	fill := func(dir string) {
		t.Helper()
		for _, n := range names {
			p := filepath.Join(dir, n)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// intact reports what dir lacks of the names it was filled with.
	intact := func(dir string) []string {
		var lost []string
		for _, n := range names {
			if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
				lost = append(lost, n)
			}
		}
		return lost
	}
	fill(filepath.Join(root, "a"))
	fill(filepath.Join(root, "b")) // the other directory of DEST
	fill(outside)
	s := &sandbox{root: root}
	r := s.open(t, extract.Options{})

	var (
		mu     sync.Mutex // held for a whole swap and back, and to refill a
		inPass atomic.Bool
		landed atomic.Int64 // swaps put in place while a pass was running
		stop   = make(chan struct{})
		done   = make(chan struct{})
	)
	a, aside := filepath.Join(root, "a"), filepath.Join(root, "a.aside")
	go func() {
		defer close(done)
		targets := []string{"b", outside}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			if os.Rename(a, aside) == nil {
				if os.Symlink(targets[i%2], a) == nil {
					if inPass.Load() {
						landed.Add(1)
					}
					os.Remove(a)
				}
				if err := os.Rename(aside, a); err != nil {
					mu.Unlock()
					t.Errorf("putting a back: %v", err)
					return
				}
			}
			mu.Unlock()
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()

	start := time.Now()
	passes, hits, absent := 0, 0, 0
	for ; passes < 50 || (landed.Load() < 20 && time.Since(start) < 30*time.Second); passes++ {
		mu.Lock()
		fill(a)
		mu.Unlock()
		inPass.Store(true)
		removed, err := r.Prune("a/sub", nil, nil, false)
		inPass.Store(false)
		mu.Lock()
		if lost := intact(filepath.Join(root, "b")); len(lost) > 0 {
			t.Errorf("pass %d: deleted in b, through the swapped a: %d entries, such as %s", passes, len(lost), lost[0])
		}
		if lost := intact(outside); len(lost) > 0 {
			t.Errorf("pass %d: deleted outside DEST, through the swapped a: %d entries, such as %s", passes, len(lost), lost[0])
		}
		if err != nil {
			hits++
			if !strings.Contains(err.Error(), "a/sub") || !strings.Contains(err.Error(), "symlink") {
				t.Errorf("pass %d: error %q: want one naming a/sub and the symlink in the way", passes, err)
			}
		} else if len(removed) == 0 {
			absent++ // a was aside, the link not yet in place: no a/sub to prune
		} else if left, _ := os.ReadDir(filepath.Join(a, "sub")); len(left) > 0 {
			// No error: the pass pruned the real a/sub, all of it.
			t.Errorf("pass %d: no error, but %d entries removed and %d left in a/sub", passes, len(removed), len(left))
		}
		mu.Unlock()
		if t.Failed() {
			break
		}
	}
	t.Logf("%d passes, %d swaps landed during a pass, %d passes met the link, %d found no a/sub", passes, landed.Load(), hits, absent)
	if landed.Load() < 20 {
		t.Errorf("only %d swaps landed while a pass ran: the race was not exercised", landed.Load())
	}
}
