package deletion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport/local"
	"github.com/bulkmove/bulkmove/wire"
)

// TestDeleteCeiling: a deleting pass that removes more than the guard's
// ceiling (half of what the count examined: SRC or DEST changed between
// the count and the pass) stops at its next result, with errOverCeiling,
// rather than going on to the end.
func TestDeleteCeiling(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	const extra = 3 * receive.PruneResultMax
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "keep"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range extra {
		if err := os.WriteFile(filepath.Join(dst, fmt.Sprintf("x%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recv, err := extract.Open(dst, extract.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	removed := 0
	_, err = prunePass(context.Background(), []send.Conn{&local.Conn{Recv: recv}}, Source{Name: src, Root: src, Rules: new(filter.Rules)},
		pruneMode{ceiling: 100}, func(r *wire.PruneResult) { removed += len(r.Removed) })
	if !errors.Is(err, errOverCeiling) {
		t.Fatalf("prune past the ceiling: %v, want errOverCeiling", err)
	}
	ents, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	if removed > receive.PruneResultMax || len(ents) != 1+extra-removed {
		t.Errorf("%d removed (%d names left of %d), want the pass stopped at its first result of %d", removed, len(ents), 1+extra, receive.PruneResultMax)
	}
}

// listings is a connection that counts, per directory, the prune
// requests that have the receiver list it (all but Exact ones, which
// name entries) and those that name entries in it.
type listings struct {
	*local.Conn
	listed, named map[string]int
}

func (l *listings) Prune(ctx context.Context, req *wire.PruneRequest, done func(*wire.PruneResult)) error {
	for _, d := range req.Dirs {
		if req.Exact {
			l.named[d.Dir]++
		} else {
			l.listed[d.Dir]++
		}
	}
	return l.Conn.Prune(ctx, req, done)
}

// TestDeleteGuardListsOnce: a guarded --delete (and one under
// --max-delete) has each directory of DEST listed once, for the count;
// the deleting pass names the entries to remove in the directories that
// hold some, and touches no other: the guard costs no second listing of
// DEST. What SRC lacks goes, and nothing else.
func TestDeleteGuardListsOnce(t *testing.T) {
	for _, maxDelete := range []bool{false, true} {
		t.Run(fmt.Sprintf("max-delete=%v", maxDelete), func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			const dirs, files = 20, 60
			for _, root := range []string{src, dst} {
				for d := range dirs {
					for f := range files {
						p := filepath.Join(root, fmt.Sprintf("d%02d", d), fmt.Sprintf("f%02d", f))
						if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(p, nil, 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			extras := []string{"d03/x", "d07/y", "d07/z"}
			for _, x := range extras {
				if err := os.WriteFile(filepath.Join(dst, x), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			recv, err := extract.Open(dst, extract.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer recv.Close()
			var stderr strings.Builder
			opt := Options{Source: Source{Name: src, Root: src, Rules: new(filter.Rules)}, Dst: dst, MaxDelete: -1, Stdout: io.Discard, Stderr: &stderr}
			if maxDelete {
				opt.MaxDelete = 2
			}
			d := New(opt)
			conn := &listings{Conn: &local.Conn{Recv: recv}, listed: map[string]int{}, named: map[string]int{}}
			if err := d.Pass(context.Background(), []send.Conn{conn}); err != nil {
				t.Fatal(err)
			}
			if len(conn.listed) != dirs+1 {
				t.Errorf("%d directories listed, want all %d", len(conn.listed), dirs+1)
			}
			for d, n := range conn.listed {
				if n != 1 {
					t.Errorf("%s listed %d times, want once", d, n)
				}
			}
			if fmt.Sprint(conn.named) != "map[d03:1 d07:1]" {
				t.Errorf("the deleting pass went to %v, want map[d03:1 d07:1]", conn.named)
			}
			want, held := int64(len(extras)), int64(0)
			if maxDelete {
				want, held = 2, 1
			}
			if st := d.Stats(); st.Deleted != want || st.Held != held || st.Errors != 0 {
				t.Errorf("%d deleted, %d held, %d errors, want %d deleted, %d held, none; stderr: %s", st.Deleted, st.Held, st.Errors, want, held, stderr.String())
			}
			left := int64(0)
			for _, x := range extras {
				if _, err := os.Lstat(filepath.Join(dst, x)); err == nil {
					left++
				}
			}
			if left != held {
				t.Errorf("%d of the extras still at DEST, want %d", left, held)
			}
			for d := range dirs {
				ents, err := os.ReadDir(filepath.Join(dst, fmt.Sprintf("d%02d", d)))
				if err != nil || len(ents) < files {
					t.Errorf("d%02d holds %d entries (%v), want %d", d, len(ents), err, files)
				}
			}
		})
	}
}
