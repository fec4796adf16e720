package extract_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/extract"
)

// swapper is a local user at DEST who swaps the directory dir for a
// symlink (made beforehand as dir+".swap") and back, over and over, each
// swap one atomic exchange of the two names. gen counts the swaps: odd
// while dir is the symlink. It is made odd just after the symlink takes
// dir's place and even just before it leaves: two equal odd readings mean
// dir was the symlink all the time between them.
type swapper struct {
	root, dir string
	gen       atomic.Int64
}

func (s *swapper) exchange() error {
	a := filepath.Join(s.root, s.dir)
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, a+".swap", unix.RENAME_EXCHANGE)
}

// run swaps until ctx is done, and returns with dir a directory again.
func (s *swapper) run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := s.exchange(); err != nil {
			return err
		}
		s.gen.Add(1)
		time.Sleep(200 * time.Microsecond)
		s.gen.Add(1)
		if err := s.exchange(); err != nil {
			return err
		}
		time.Sleep(200 * time.Microsecond)
	}
	return nil
}

// TestSwapRace: while passes write into two directories of DEST, a local
// user swaps each for a symlink and back in a tight loop: x for one to
// the directory y of DEST, p (the parent of the directory written) for one
// to a directory outside DEST. After each pass nothing outside the real x
// and p/q changed (y, the rest of DEST, the outside directory), every
// entry landed in its real directory or failed naming the symlink, and
// every batch that opened its directory while it was a symlink (a hit:
// the swap counter odd and unchanged across the write that opens it)
// failed for all its entries. Fewer than 20 swaps hit in the whole run
// would not prove the race was run: that fails too.
func TestSwapRace(t *testing.T) {
	openModes(t, func(t *testing.T) {
		const passes, batches, files = 50, 4, 5
		s := newSandbox(t)
		for _, d := range []string{"x", "y", "p/q"} {
			// 0700: as the sandbox's checks leave every directory.
			if err := os.MkdirAll(filepath.Join(s.root, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		for k := range files {
			if err := os.WriteFile(filepath.Join(s.root, "y", fmt.Sprint("f", k)), []byte(fmt.Sprintf("y's own file %d, not to be overwritten", k)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("y", filepath.Join(s.root, "x.swap")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(s.outside, filepath.Join(s.root, "p.swap")); err != nil {
			t.Fatal(err)
		}
		swappers := []*swapper{{root: s.root, dir: "x"}, {root: s.root, dir: "p"}}
		targets := []string{"x", "p/q"} // where each one's files go
		refusal := func(sw *swapper) string {
			return filepath.Join(s.root, sw.dir) + ": is a symlink, not a directory; nothing written through it"
		}
		ySnap := snapshot(t, filepath.Join(s.root, "y"))
		content := map[string]string{}       // what each file written must hold
		hits := make([]int, len(swappers))   // batches
		swapsHit := []map[int64]bool{{}, {}} // the swaps they met
		start := time.Now()
		for pass := range passes {
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, sw := range swappers {
				wg.Go(func() {
					if err := sw.run(ctx); err != nil {
						t.Errorf("swap %s: %v", sw.dir, err)
					}
				})
			}
			r, err := extract.Open(s.root, extract.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for b := range batches {
				for v, sw := range swappers {
					entries := make([]sharder.Entry, files)
					bodies := make([]string, files)
					for k := range entries {
						bodies[k] = fmt.Sprintf("%-3s pass %03d batch %d file %d", targets[v], pass, b, k)
						entries[k] = fileE(targets[v]+"/f"+fmt.Sprint(k), int64(len(bodies[k])))
					}
					tx := r.Begin(entries)
					g0 := sw.gen.Load()
					// The first write opens the batch's directory.
					if err := tx.Write(0, strings.NewReader(bodies[0])); err != nil {
						t.Fatal(err)
					}
					hit := g0%2 == 1 && sw.gen.Load() == g0
					if hit {
						swapsHit[v][g0] = true
					}
					for k := 1; k < files; k++ {
						if err := tx.Write(k, strings.NewReader(bodies[k])); err != nil {
							t.Fatal(err)
						}
					}
					ack := tx.Commit(uint64(pass*100+b*10+v), nil)
					failed := map[int]bool{}
					for _, e := range ack.Errors {
						failed[e.Index] = true
						if !strings.Contains(e.Msg, refusal(sw)) {
							t.Errorf("pass %d: %s: error %q does not say %q", pass, entries[e.Index].Path, e.Msg, refusal(sw))
						}
					}
					if hit {
						hits[v]++
						if len(failed) != files {
							t.Errorf("pass %d: a batch that opened %s while it was a symlink: %d of %d files failed, want all",
								pass, sw.dir, len(failed), files)
						}
					}
					for k := range entries {
						if !failed[k] {
							content[entries[k].Path] = bodies[k]
						}
					}
				}
			}
			r.Close()
			cancel()
			wg.Wait()

			// The swaps are over: every name is where it was.
			if got := snapshot(t, filepath.Join(s.root, "y")); got != ySnap {
				t.Fatalf("pass %d: y changed:\n%s\nwas\n%s", pass, got, ySnap)
			}
			if t.Failed() {
				t.FailNow()
			}
			names := func(d string) string {
				ents, err := os.ReadDir(filepath.Join(s.root, d))
				if err != nil {
					t.Fatal(err)
				}
				var ns []string
				for _, e := range ents {
					ns = append(ns, fmt.Sprintf("%s(%v)", e.Name(), e.Type()))
				}
				return strings.Join(ns, " ")
			}
			if got, want := names("."), "p(d---------) p.swap(L---------) x(d---------) x.swap(L---------) y(d---------)"; got != want {
				t.Fatalf("pass %d: DEST holds %s, want %s", pass, got, want)
			}
			if got := names("p"); got != "q(d---------)" {
				t.Fatalf("pass %d: p holds %s, want q alone", pass, got)
			}
			for _, d := range targets {
				want := "" // (while no batch of it got through)
				if _, ok := content[d+"/f0"]; ok {
					want = "f0(----------) f1(----------) f2(----------) f3(----------) f4(----------)"
				}
				if got := names(d); got != want {
					t.Fatalf("pass %d: %s holds %s, want %s", pass, d, got, want)
				}
			}
			for p, want := range content {
				if got, err := os.ReadFile(filepath.Join(s.root, p)); err != nil || string(got) != want {
					t.Fatalf("pass %d: %s holds %q (%v), want %q", pass, p, got, err, want)
				}
			}
			for _, v := range s.violations(nil) {
				t.Fatalf("pass %d: %s", pass, v)
			}
		}
		t.Logf("%d passes in %v; batches that opened a directory while it was a symlink: x %d (in %d swaps), p %d (in %d swaps)",
			passes, time.Since(start).Round(time.Millisecond), hits[0], len(swapsHit[0]), hits[1], len(swapsHit[1]))
		if n := len(swapsHit[0]) + len(swapsHit[1]); n < 20 {
			t.Errorf("only %d swaps met a batch opening the directory: the race was not run", n)
		}
	})
}
