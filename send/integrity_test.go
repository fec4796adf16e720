package send_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
)

// flipper relays bytes and flips one, once, where it sees marker: a
// corruption in transit that TCP and SSH would not see (a faulty NIC,
// memory, or a bug).
type flipper struct {
	w       io.Writer
	marker  []byte
	flipped atomic.Bool
	tail    []byte
}

func (f *flipper) Write(p []byte) (int, error) {
	if !f.flipped.Load() {
		buf := append(f.tail, p...)
		if i := bytes.Index(buf, f.marker); i >= 0 {
			if j := i - len(f.tail); j >= 0 && j < len(p) {
				q := append([]byte(nil), p...)
				q[j] ^= 0xff
				f.flipped.Store(true)
				return f.w.Write(q)
			}
		}
		f.tail = append([]byte(nil), buf[max(0, len(buf)-len(f.marker)):]...)
	}
	return f.w.Write(p)
}

// TestIntegrity: a byte flipped on the way is caught by the hash check
// before the file takes its final name; with Restat the file goes again
// and lands right, without, it fails with CodeCorrupt.
func TestIntegrity(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, mode := range []string{"retried", "reported", "off"} {
		retry := mode == "retried"
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			dir := tmpDir(t)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			os.MkdirAll(src, 0o755)
			content := strings.Repeat("all work and no play ", 5000) + "MARKER" + strings.Repeat("z", 1000)
			os.WriteFile(filepath.Join(src, "victim"), []byte(content), 0o644)
			os.WriteFile(filepath.Join(src, "other"), []byte("fine"), 0o644)

			fl := &flipper{marker: []byte("MARKER")}
			c, done := agentVia(t, ctx, "s0", dst, source.Source{Root: src}, func(w io.Writer) io.Writer { fl.w = w; return fl })
			c.NoIntegrity = mode == "off" // --no-verify-transfer
			col := &collector{}
			def := &send.Deferred{}
			batches := make(chan *model.Batch, 16)
			if _, err := sharder.Run(ctx, src, sharder.Options{Deferred: def.Add}, batches); err != nil {
				t.Fatal(err)
			}
			pool := &send.Pool{Conns: []send.Conn{c}, OnResult: col.add}
			if retry {
				pool.Restat = func(e model.Entry) (model.Entry, bool) { return sharder.Restat(src, e) }
			}
			if err := pool.Run(ctx, batches, def); err != nil {
				t.Fatal(err)
			}
			<-done
			if !fl.flipped.Load() {
				t.Fatal("the relay flipped no byte")
			}
			got, err := os.ReadFile(filepath.Join(dst, "victim"))
			errs := strings.Join(col.errors(), "\n")
			switch mode {
			case "retried":
				if err != nil || string(got) != content || errs != "" {
					t.Errorf("victim: %v, errors %q; want it sent again and intact", err, errs)
				}
				if n := col.done()["victim"]; n != 1 {
					t.Errorf("victim reported done %d times, want once: not before the copy that landed", n)
				}
			case "off":
				// Without the check, what arrived is installed: that is
				// what the flag gives up.
				if err != nil || string(got) == content || errs != "" {
					t.Errorf("victim: %v, intact %v, errors %q; want the corrupted copy installed, unnoticed", err, string(got) == content, errs)
				}
			default:
				if err == nil {
					t.Errorf("a corrupted file landed under its final name")
				}
				if !strings.Contains(errs, "does not hash to what the sender read") {
					t.Errorf("errors %q do not report the corruption", errs)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dst, "other")); string(b) != "fine" {
				t.Errorf("the other file did not land")
			}
			noTemps(t, dst)
		})
	}
}
