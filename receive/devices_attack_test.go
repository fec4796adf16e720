package receive_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// hostileNodes are what a hostile sender makes at DEST to reach past its
// files: /dev/mem's and the first disk's devices, and a FIFO.
var hostileNodes = []model.Entry{
	{Path: "mem", Kind: model.KindCharDevice, Mode: 0o666, MTime: mtime, UID: hostileUID, GID: hostileUID, Rdev: model.Mkdev(1, 1)},
	{Path: "sda", Kind: model.KindBlockDevice, Mode: 0o666, MTime: mtime, UID: hostileUID, GID: hostileUID, Rdev: model.Mkdev(8, 0)},
	{Path: "pipe", Kind: model.KindFIFO, Mode: 0o644, MTime: mtime},
}

// hostileNodesSend plays a hostile sender, writing the frames itself: its
// Hello asks for opts, and, if the receiver answers, it sends
// hostileNodes in a final batch, whatever it asked for. It returns the
// batch's ack (nil if the receiver refused the job) and the refusal.
func hostileNodesSend(t *testing.T, hub *receive.Hub, opts wire.ReceiveOptions) (*wire.BatchAck, error) {
	t.Helper()
	a := startHub(t, hub)
	a.send(wire.Hello, wire.EncodeJSON(wire.Handshake{Proto: wire.Proto, Version: "hostile", Options: &opts}))
	if f := <-a.out; f.typ == wire.Fail {
		return nil, a.wait()
	} else if f.typ != wire.Hello {
		t.Fatalf("receiver answered the Hello with %q %q", f.typ, f.p)
	}
	a.send(wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: 1, Flags: wire.FlagFinal, Entries: hostileNodes}))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{wire.PAXBatch: "1"}})
	tw.Close()
	a.send(wire.Data, wire.EncodeID(1))
	a.sendRaw(buf.Bytes())
	a.send(wire.Commit, wire.EncodeCommit(1, nil))
	ack, err := wire.DecodeAck(a.expect(wire.Ack).p)
	if err != nil {
		t.Fatal(err)
	}
	a.send(wire.End, nil)
	a.expect(wire.Summary)
	if err := a.wait(); err != nil {
		t.Fatal(err)
	}
	return ack, nil
}

// TestHostileDevices: a hostile sender sends devices (/dev/mem's number,
// a disk's) and a FIFO. A receiver whose policy does not allow devices
// (serve without --allow-devices, an agent or a pull without -D) refuses
// a Hello that asks for them, naming -D and the flag that allows them;
// one that did not ask gets each node refused by name, and nothing is
// made. A receiver that allows devices makes them for a Hello that asks
// (root); a FIFO not asked for (--specials) is refused all the same.
func TestHostileDevices(t *testing.T) {
	root := os.Geteuid() == 0
	for _, tc := range []struct {
		name   string
		policy extract.Policy
		opts   wire.ReceiveOptions
		root   bool            // needs root (CAP_MKNOD)
		refuse bool            // the Hello is refused, naming -D
		made   map[string]bool // what lands
	}{
		{name: "asked, not allowed", opts: wire.ReceiveOptions{Devices: true, Specials: true}, refuse: true},
		{name: "not asked", policy: extract.AllowAll},
		{name: "not asked, not allowed"},
		{name: "only specials asked", policy: extract.AllowAll, opts: wire.ReceiveOptions{Specials: true}, made: map[string]bool{"pipe": true}},
		{name: "devices asked and allowed", policy: extract.AllowAll, opts: wire.ReceiveOptions{Devices: true, Owner: true}, root: true,
			made: map[string]bool{"mem": true, "sda": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && !root {
				t.Skip("making devices needs root")
			}
			dst := filepath.Join(t.TempDir(), "dst")
			tc.policy.Hint = func(o string) string { return "allow-" + o }
			ack, err := hostileNodesSend(t, &receive.Hub{Root: dst, Version: "test-agent", Policy: tc.policy}, tc.opts)
			var pe *extract.PolicyError
			switch {
			case tc.refuse && (!wire.IsRefused(err) || !errors.As(err, &pe) || !strings.Contains(err.Error(), "-D (devices)") || !strings.Contains(err.Error(), "allow-devices")):
				t.Errorf("the receiver took the job (%v), want it refused naming -D and allow-devices", err)
			case !tc.refuse && err != nil:
				t.Fatalf("refused: %v", err)
			}
			refused := map[string]bool{}
			if ack != nil {
				for _, e := range ack.Errors {
					n := hostileNodes[e.Index]
					if e.Code != wire.CodeInvalid || !strings.Contains(e.Msg, "refusing "+n.Kind.String()+` "`+n.Path+`"`) {
						t.Errorf("%s: error %d %q, want a refusal naming it", n.Path, e.Code, e.Msg)
					}
					refused[n.Path] = true
				}
			}
			for _, n := range hostileNodes {
				var st unix.Stat_t
				err := unix.Lstat(filepath.Join(dst, n.Path), &st)
				switch {
				case tc.made[n.Path] && err != nil:
					t.Errorf("%s was not made: %v", n.Path, err)
				case tc.made[n.Path] && n.Kind.IsDevice() && (st.Rdev != unix.Mkdev(n.Major(), n.Minor()) || st.Uid != hostileUID):
					t.Errorf("%s: device %d:%d of uid %d, want %d:%d of %d", n.Path, unix.Major(st.Rdev), unix.Minor(st.Rdev), st.Uid, n.Major(), n.Minor(), hostileUID)
				case !tc.made[n.Path] && err == nil:
					t.Errorf("%s was made (mode %#o), want it refused", n.Path, st.Mode)
				case !tc.made[n.Path] && ack != nil && !refused[n.Path]:
					t.Errorf("%s: not made, and the ack does not say so (%+v)", n.Path, ack.Errors)
				}
			}
		})
	}
}
