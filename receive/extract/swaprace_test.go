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

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
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
	replaced  int // directories moved to the attic (runDelete)
	// replacedAt holds the swaps (their odd gen) whose symlink the
	// receiver replaced (runDelete): until the swap back, dir is the
	// receiver's new directory, a real one.
	replacedAt map[int64]bool
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

// batchOf is batch b of a pass of the swap tests: files files in the
// directory dir, each named by name, each holding what says which it is.
func batchOf(dir string, pass, b, files int, name func(b, k int) string) ([]model.Entry, []string) {
	entries := make([]model.Entry, files)
	bodies := make([]string, files)
	for k := range entries {
		bodies[k] = fmt.Sprintf("%-3s pass %03d batch %d file %d", dir, pass, b, k)
		entries[k] = fileE(dir+"/"+name(b, k), int64(len(bodies[k])))
	}
	return entries, bodies
}

// swapBatch writes the files entries, with bodies, as batch id while sw
// swaps, after a quick check as a pass makes, and reports the swap in
// place when the batch began (g0) and whether the batch's first write,
// which opens its directory, met it all along (hit: the swap counter odd
// and unchanged across it).
func swapBatch(t *testing.T, r *extract.Receiver, sw *swapper, entries []model.Entry, bodies []string, id uint64) (ack *wire.BatchAck, g0 int64, hit bool) {
	t.Helper()
	r.Need(entries)
	tx := r.Begin(entries)
	g0 = sw.gen.Load()
	if err := tx.Write(0, strings.NewReader(bodies[0])); err != nil {
		t.Fatal(err)
	}
	hit = g0%2 == 1 && sw.gen.Load() == g0
	for k := 1; k < len(entries); k++ {
		if err := tx.Write(k, strings.NewReader(bodies[k])); err != nil {
			t.Fatal(err)
		}
	}
	return tx.Commit(id, nil), g0, hit
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
					entries, bodies := batchOf(targets[v], pass, b, files, func(_, k int) string { return fmt.Sprint("f", k) })
					ack, g0, hit := swapBatch(t, r, sw, entries, bodies, uint64(pass*100+b*10+v))
					if hit {
						swapsHit[v][g0] = true
					}
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
			names := func(d string) string { return strings.Join(dirNames(t, filepath.Join(s.root, d)), " ") }
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

// runDelete is run against passes with --delete, whose receiver replaces
// a symlink that stands where a directory goes and that it did not open
// as a directory earlier in the run (removed as a link, never followed:
// it cannot tell such a swap from a type change at DEST, see inway.go).
// Each swap back then puts the original directory back and moves the
// receiver's new directory into attic (what it holds is checked there),
// and the next swap makes the symlink, to target, again. It returns with
// dir the original directory and dir+".swap" the symlink.
func (s *swapper) runDelete(ctx context.Context, target, attic string) error {
	link := filepath.Join(s.root, s.dir) + ".swap"
	for ctx.Err() == nil {
		if err := os.Symlink(target, link); err != nil && !os.IsExist(err) {
			return err
		}
		if err := s.exchange(); err != nil {
			return err
		}
		g := s.gen.Add(1)
		time.Sleep(200 * time.Microsecond)
		s.gen.Add(1)
		if err := s.restore(attic, g); err != nil {
			return err
		}
		time.Sleep(200 * time.Microsecond)
	}
	if err := os.Symlink(target, link); err != nil && !os.IsExist(err) {
		return err
	}
	return nil
}

// restore swaps the original directory, at dir+".swap", back to dir, and
// moves what took dir's place, if the receiver replaced the symlink of the
// swap g, into attic.
func (s *swapper) restore(attic string, g int64) error {
	a := filepath.Join(s.root, s.dir)
	for {
		err := s.exchange()
		if err == unix.ENOENT {
			// The receiver removed the link and has not made its
			// directory yet.
			err = unix.Renameat2(unix.AT_FDCWD, a+".swap", unix.AT_FDCWD, a, unix.RENAME_NOREPLACE)
			if err == unix.EEXIST {
				continue // made meanwhile
			}
			s.replacedAt[g] = true
			return err
		}
		if err != nil {
			return err
		}
		break
	}
	fi, err := os.Lstat(a + ".swap")
	if err != nil || !fi.IsDir() {
		return err // the symlink, not followed
	}
	s.replaced++
	s.replacedAt[g] = true
	return os.Rename(a+".swap", filepath.Join(attic, fmt.Sprintf("%s.%d", s.dir, s.replaced)))
}

// TestSwapRaceDelete is TestSwapRace for passes with --delete, each a
// whole pass: batches written into x and p/q, then a prune of each, as the
// sender asks once their names are sent (each real directory holds extra
// files, old*, for the prune to remove; y and the outside directory hold
// such names too, which a prune through a link would remove). A swap that
// a batch or a prune meets where the pass already opened that directory
// fails it, naming the symlink; where it had not (the first batch of the
// pass into it), the receiver may take the symlink for a type change and
// replace it, never followed: that batch lands in the new directory. After
// each pass, y, the outside directory and the rest of DEST are as they
// were, the real x and p/q and every directory the receiver made in a
// link's place hold only files a batch wrote there, with what the batch
// wrote, and old* names the prune did not reach; nothing else was
// removed; and the first batch that wrote in each directory made in a
// link's place had not opened that directory before in the pass. Fewer
// than 20 swaps met by a batch or a prune would not prove the race was
// run: that fails too.
func TestSwapRaceDelete(t *testing.T) {
	openModes(t, func(t *testing.T) {
		const passes, batches, files, olds = 50, 4, 5, 3
		s := newSandbox(t)
		elsewhere := filepath.Join(s.base, "elsewhere") // outside DEST, not empty
		attic := filepath.Join(s.root, "attic")
		for _, d := range []string{"x", "y", "p/q", "attic", "../../elsewhere/q"} {
			if err := os.MkdirAll(filepath.Join(s.root, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		put := func(d, name, data string) {
			t.Helper()
			if err := os.WriteFile(filepath.Join(d, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range []string{filepath.Join(s.root, "y"), filepath.Join(elsewhere, "q")} {
			for k := range files {
				for b := range batches {
					put(d, fileName(b, k), fmt.Sprintf("%s's own file %d, not to be overwritten", d, k))
				}
			}
			for k := range olds {
				put(d, fmt.Sprint("old", k), "not to be deleted")
			}
		}
		if err := os.Symlink("y", filepath.Join(s.root, "x.swap")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(s.root, "p.swap")); err != nil {
			t.Fatal(err)
		}
		swappers := []*swapper{{root: s.root, dir: "x", replacedAt: map[int64]bool{}}, {root: s.root, dir: "p", replacedAt: map[int64]bool{}}}
		linkTo := []string{"y", elsewhere}
		targets := []string{"x", "p/q"} // where each one's files go
		ySnap := snapshot(t, filepath.Join(s.root, "y"))
		elseSnap := snapshot(t, elsewhere)
		wrote := map[string]map[string]bool{} // the bodies a batch landed for each path
		var keep []string                     // what the source holds in x and p/q
		for b := range batches {
			for k := range files {
				keep = append(keep, fileName(b, k))
			}
		}
		var hits, refused, replaced, pruneHits [2]int // batches, prunes
		swapsHit := []map[int64]bool{{}, {}}
		start := time.Now()
		var names func(d string) []string
		var openedBy [2][batches]bool
		inAttic := map[string]bool{}
		for pass := range passes {
			for _, d := range targets {
				for k := range olds {
					put(filepath.Join(s.root, d), fmt.Sprint("old", k), "to be deleted")
				}
			}
			r, err := extract.Open(s.root, extract.Options{Delete: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for v, sw := range swappers {
				wg.Go(func() {
					if err := sw.runDelete(ctx, linkTo[v], attic); err != nil {
						t.Errorf("swap %s: %v", sw.dir, err)
					}
				})
			}
			opened := [2]bool{}           // a batch of this pass landed in it
			openedBy = [2][batches]bool{} // opened, when each batch began
			// What met a swap, told apart once the swaps are over.
			type met struct {
				v       int
				g       int64
				opened  bool // the directory, by a batch before
				prune   bool
				refused bool // every file failed; the prune failed
				refusal string
			}
			var mets []met
			for b := range batches {
				for v, sw := range swappers {
					entries, bodies := batchOf(targets[v], pass, b, files, fileName)
					openedBefore := opened[v]
					openedBy[v][b] = openedBefore
					ack, g0, hit := swapBatch(t, r, sw, entries, bodies, uint64(pass*100+b*10+v))
					failed := map[int]bool{}
					for _, e := range ack.Errors {
						failed[e.Index] = true
						if want := filepath.Join(s.root, sw.dir) + ": "; !strings.Contains(e.Msg, want) {
							t.Errorf("pass %d: %s: error %q does not name %s", pass, entries[e.Index].Path, e.Msg, want)
						}
					}
					if hit {
						mets = append(mets, met{v: v, g: g0, opened: openedBefore, refused: len(failed) == files,
							refusal: fmt.Sprintf("%d of %d files failed", len(failed), files)})
					}
					for k := range entries {
						if !failed[k] {
							opened[v] = true
							if wrote[entries[k].Path] == nil {
								wrote[entries[k].Path] = map[string]bool{}
							}
							wrote[entries[k].Path][bodies[k]] = true
						}
					}
				}
			}
			for v, sw := range swappers {
				g0 := sw.gen.Load()
				_, err := r.PruneDir(targets[v], extract.NewKeep(keep...), extract.PruneOptions{}, func(rm extract.Removed) error {
					if want := targets[v] + "/old"; rm.IsDir || !strings.HasPrefix(rm.Path, want) {
						t.Errorf("pass %d: the prune of %s removed %+v", pass, targets[v], rm)
					}
					return nil
				})
				hit := g0%2 == 1 && sw.gen.Load() == g0
				if err != nil && (!strings.Contains(err.Error(), targets[v]) || !strings.Contains(err.Error(), "symlink")) {
					t.Errorf("pass %d: the prune of %s: %v: want an error naming it and the symlink", pass, targets[v], err)
				}
				if hit {
					mets = append(mets, met{v: v, g: g0, opened: opened[v], prune: true, refused: err != nil, refusal: "no error"})
				}
			}
			r.Close()
			cancel()
			wg.Wait()
			for _, m := range mets {
				sw := swappers[m.v]
				swapsHit[m.v][m.g] = true
				what := "batch"
				if m.prune {
					what = "prune"
					pruneHits[m.v]++
				} else {
					hits[m.v]++
				}
				switch {
				case sw.replacedAt[m.g]:
					// The receiver took the symlink for a type change
					// and replaced it: the batch landed in the new
					// directory, or met that directory, a real one.
					replaced[m.v]++
				case m.refused:
					refused[m.v]++
				case m.opened:
					t.Errorf("pass %d: a %s that opened %s, already opened in this pass, while it was a symlink: %s, want all to fail",
						pass, what, sw.dir, m.refusal)
				default:
					t.Errorf("pass %d: a %s that opened %s while it was a symlink neither failed nor replaced it: %s", pass, what, sw.dir, m.refusal)
				}
			}

			// The swaps are over: every name is where it was.
			if got := snapshot(t, filepath.Join(s.root, "y")); got != ySnap {
				t.Fatalf("pass %d: y changed:\n%s\nwas\n%s", pass, got, ySnap)
			}
			if got := snapshot(t, elsewhere); got != elseSnap {
				t.Fatalf("pass %d: the directory outside DEST changed:\n%s\nwas\n%s", pass, got, elseSnap)
			}
			if t.Failed() {
				t.FailNow()
			}
			names = func(d string) []string { return dirNames(t, filepath.Join(s.root, d)) }
			if got, want := strings.Join(names("."), " "), "attic(d---------) p(d---------) p.swap(L---------) x(d---------) x.swap(L---------) y(d---------)"; got != want {
				t.Fatalf("pass %d: DEST holds %s, want %s", pass, got, want)
			}
			if got := strings.Join(names("p"), " "); got != "q(d---------)" {
				t.Fatalf("pass %d: p holds %s, want q alone", pass, got)
			}
			// holds checks that the directory d (at p, under the root)
			// holds only files written there and, if old, old* ones, and
			// returns the first batch of this pass that wrote one (-1:
			// none).
			holds := func(d, p string, old bool) (first int) {
				first = -1
				for _, n := range names(d) {
					name := strings.TrimSuffix(n, "(----------)")
					if old && strings.HasPrefix(name, "old") && name != n {
						continue
					}
					got, err := os.ReadFile(filepath.Join(s.root, d, name))
					if err != nil || !wrote[p+"/"+name][string(got)] {
						t.Fatalf("pass %d: %s holds %s: %q (%v), which no batch wrote to %s", pass, d, n, got, err, p+"/"+name)
					}
					var ps, b, k int
					if _, err := fmt.Sscanf(string(got[4:]), "pass %d batch %d file %d", &ps, &b, &k); err == nil && ps == pass && (first < 0 || b < first) {
						first = b
					}
				}
				return first
			}
			for _, d := range targets {
				holds(d, d, true)
			}
			for _, n := range names("attic") {
				name := strings.TrimSuffix(n, "(d---------)")
				if inAttic[name] {
					continue // checked after an earlier pass
				}
				inAttic[name] = true
				v, first := 0, -1
				switch {
				case strings.HasPrefix(name, "x."):
					first = holds("attic/"+name, "x", false)
				case strings.HasPrefix(name, "p."):
					// (Empty: the receiver opened the real p, put back
					// before it went on.)
					switch in := strings.Join(names("attic/"+name), " "); in {
					case "q(d---------)":
						v, first = 1, holds("attic/"+name+"/q", "p/q", false)
					case "":
					default:
						t.Fatalf("pass %d: the attic's %s holds %s", pass, name, in)
					}
				default:
					t.Fatalf("pass %d: the attic holds %s", pass, n)
				}
				// The receiver made it in place of a symlink: in the
				// first batch that opened its directory in the pass.
				if first >= 0 && openedBy[v][first] {
					t.Fatalf("pass %d: batch %d replaced the symlink %s with a directory (now the attic's %s), though the pass had opened %s before",
						pass, first, swappers[v].dir, name, targets[v])
				}
			}
			for _, v := range s.violations(nil) {
				if v != "created next to the parent: elsewhere" {
					t.Fatalf("pass %d: %s", pass, v)
				}
			}
		}
		t.Logf("%d passes in %v; batches and prunes that met a swap: x %d+%d (%d refused, %d in a swap whose symlink it replaced), p %d+%d (%d refused, %d replaced); swaps met: x %d, p %d",
			passes, time.Since(start).Round(time.Millisecond), hits[0], pruneHits[0], refused[0], replaced[0],
			hits[1], pruneHits[1], refused[1], replaced[1], len(swapsHit[0]), len(swapsHit[1]))
		if n := len(swapsHit[0]) + len(swapsHit[1]); n < 20 {
			t.Errorf("only %d swaps met a batch or a prune in that directory: the race was not run", n)
		}
	})
}

// fileName is the name of file k of each batch b of TestSwapRaceDelete:
// its own, so that a directory shows which batches wrote in it.
func fileName(b, k int) string { return fmt.Sprintf("b%df%d", b, k) }

// dirNames lists what the directory d holds, each name with its type.
func dirNames(t *testing.T, d string) []string {
	t.Helper()
	ents, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range ents {
		ns = append(ns, fmt.Sprintf("%s(%v)", e.Name(), e.Type()))
	}
	return ns
}

// TestSwapOfOpenedParentRefused: with --delete, a directory of DEST that
// a batch went through on its way to another (a, on the way to a/b) and
// that a local user then swaps for a symlink, to a directory of DEST or
// out of it, is no type change: a later batch into a new directory below
// it (a/c) and a prune there fail naming the symlink, which stays, and
// nothing is written or removed through it, nor in the directory the
// user moved aside.
func TestSwapOfOpenedParentRefused(t *testing.T) {
	openModes(t, func(t *testing.T) {
		s := newSandbox(t)
		dirsWithFile(t, s.root, "old", "a", "y/c")
		ySnap := snapshot(t, filepath.Join(s.root, "y"))
		r := s.open(t, extract.Options{Delete: true})
		write := func(p string) *wire.BatchAck {
			t.Helper()
			tx := r.Begin([]model.Entry{fileE(p, 4)})
			if err := tx.Write(0, strings.NewReader("data")); err != nil {
				t.Fatal(err)
			}
			return tx.Commit(1, nil)
		}
		if ack := write("a/b/f"); len(ack.Errors) > 0 {
			t.Fatalf("a/b/f: %v", ack.Errors)
		}
		a := filepath.Join(s.root, "a")
		if err := os.Rename(a, a+".aside"); err != nil {
			t.Fatal(err)
		}
		asideSnap := snapshot(t, a+".aside")
		for _, target := range []string{"y", s.outside} {
			if err := os.Symlink(target, a); err != nil {
				t.Fatal(err)
			}
			refusal := a + ": is a symlink"
			if ack := write("a/c/g"); len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, refusal) {
				t.Errorf("a -> %s: a/c/g: %+v; want it refused: %q", target, ack.Errors, refusal)
			}
			if _, err := r.Prune("a/c", nil, nil, false); err == nil || !strings.Contains(err.Error(), "symlink") {
				t.Errorf("a -> %s: prune of a/c: %v; want an error naming the symlink", target, err)
			}
			if fi, err := os.Lstat(a); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("a -> %s: a is now %v (%v); want the symlink left", target, fi, err)
			}
			if err := os.Remove(a); err != nil {
				t.Fatal(err)
			}
		}
		if got := snapshot(t, filepath.Join(s.root, "y")); got != ySnap {
			t.Errorf("y changed:\n%s\nwas\n%s", got, ySnap)
		}
		if got := snapshot(t, a+".aside"); got != asideSnap {
			t.Errorf("the directory moved aside changed:\n%s\nwas\n%s", got, asideSnap)
		}
		s.check(t)
	})
}

// TestSwapAfterNeedRefused: with --delete, a directory of DEST that the
// quick check of a batch found a directory (a, and the x above it), and
// that a local user swaps for a symlink before the batch is written, is no
// type change: the batch fails naming the symlink, which stays, and
// nothing is written through it, nor in the directory moved aside.
func TestSwapAfterNeedRefused(t *testing.T) {
	openModes(t, func(t *testing.T) {
		s := newSandbox(t)
		dirsWithFile(t, s.root, "f", "x/a", "y")
		ySnap := snapshot(t, filepath.Join(s.root, "y"))
		for _, link := range []string{"x/a", "x"} {
			r := s.open(t, extract.Options{Delete: true})
			entries := []model.Entry{fileE("x/a/f", 4)}
			if need := r.Need(entries); !need[0] {
				t.Fatalf("x/a/f not needed")
			}
			l := filepath.Join(s.root, link)
			if err := os.Rename(l, l+".aside"); err != nil {
				t.Fatal(err)
			}
			asideSnap := snapshot(t, l+".aside")
			if err := os.Symlink(filepath.Join(s.root, "y"), l); err != nil {
				t.Fatal(err)
			}
			tx := r.Begin(entries)
			if err := tx.Write(0, strings.NewReader("data")); err != nil {
				t.Fatal(err)
			}
			refusal := l + ": is a symlink"
			if ack := tx.Commit(1, nil); len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, refusal) {
				t.Errorf("%s swapped after the quick check: %+v; want x/a/f refused: %q", link, ack.Errors, refusal)
			}
			if fi, err := os.Lstat(l); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s is now %v (%v); want the symlink left", link, fi, err)
			}
			if got := snapshot(t, l+".aside"); got != asideSnap {
				t.Errorf("%s, moved aside, changed:\n%s\nwas\n%s", link, got, asideSnap)
			}
			if err := os.Remove(l); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(l+".aside", l); err != nil {
				t.Fatal(err)
			}
		}
		if got := snapshot(t, filepath.Join(s.root, "y")); got != ySnap {
			t.Errorf("y changed:\n%s\nwas\n%s", got, ySnap)
		}
		s.check(t)
	})
}

// dirsWithFile makes each directory dirs under root, with a file name in
// it that holds its own data.
func dirsWithFile(t *testing.T, root, name string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, name), []byte("its own"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
