package receive_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// A dry run's session (ReceiveOptions.DryRun) on a DEST that is not
// there: it is not made, an itemize question finds every entry new, and
// a batch to move, the first frame that would write, is refused.
func TestServeDryRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, what := range []string{"batch", "prune"} {
		t.Run(what, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "dst", "sub")
			a := startServe(t, root)
			a.send(wire.Hello, wire.EncodeJSON(wire.Handshake{Proto: wire.Proto, Version: "test-sender", Options: &wire.ReceiveOptions{DryRun: true, Itemize: true}}))
			a.expect(wire.Hello)
			entries := []model.Entry{{Path: ".", Kind: model.KindDir, Mode: 0o755, MTime: mtime}, fileEntry("a", 3), {Path: "l", Kind: model.KindSymlink, Link: "a", MTime: mtime}}
			a.send(wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: 1, Flags: wire.FlagItemize, Entries: entries}))
			ack, err := wire.DecodeAck(a.expect(wire.Ack).p)
			want := []wire.Item{{Index: 0, Flags: wire.ItemNew}, {Index: 1, Flags: wire.ItemNew | wire.ItemSent}, {Index: 2, Flags: wire.ItemNew}}
			if err != nil || len(ack.Items) != len(want) {
				t.Fatalf("ack %+v %v, want items %v", ack, err, want)
			}
			for i := range want {
				if ack.Items[i] != want[i] {
					t.Errorf("item %d: %+v, want %+v", i, ack.Items[i], want[i])
				}
			}
			if what == "batch" {
				a.send(wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: 2, Entries: []model.Entry{fileEntry("a", 3)}}))
			} else {
				a.send(wire.Prune, wire.EncodePrune(&wire.PruneRequest{ID: 3, Dirs: []wire.PruneDir{{Dir: "."}}}))
			}
			if err := a.failed(); !strings.Contains(err.Error(), "dry run") {
				t.Errorf("a %s in a dry run: %v, want refused", what, err)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(root))); !os.IsNotExist(err) {
				t.Errorf("the dry run made %s: %v", filepath.Dir(root), err)
			}
		})
	}
}
