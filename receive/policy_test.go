package receive_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/xattrs"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// capSetuid is a file capability granting CAP_SETUID (effective,
// permitted): security.capability, VFS_CAP_REVISION_2, as setcap
// cap_setuid+ep writes it. Whoever runs such a file may become root.
var capSetuid = string([]byte{1, 0, 0, 2, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})

// hostileUID owns the hostile sender's file: not the receiving user.
const hostileUID = 4242

// hostileXattrs are what the hostile sender puts on its file.
var hostileXattrs = map[string]string{"user.x": "u", "trusted.x": "t", wire.XattrCapability: capSetuid}

// hostileSend plays a hostile sender, writing the frames itself: its Hello
// asks for opts, and, if the receiver answers, it sends one file, "evil",
// setuid and setgid, owned by hostileUID, with hostileXattrs in its tar
// header if it asked for attributes. It returns the receiver's Hello
// (nil if it refused) and the refusal.
func hostileSend(t *testing.T, hub *receive.Hub, opts wire.ReceiveOptions) (*wire.Handshake, error) {
	t.Helper()
	a := startHub(t, hub)
	a.send(wire.Hello, wire.EncodeJSON(wire.Handshake{Proto: wire.Proto, Version: "hostile", Options: &opts}))
	f := <-a.out
	if f.typ == wire.Fail {
		return nil, a.wait()
	}
	if f.typ != wire.Hello {
		t.Fatalf("receiver answered the Hello with %q %q", f.typ, f.p)
	}
	var h wire.Handshake
	if err := wire.DecodeJSON(f.p, &h); err != nil {
		t.Fatal(err)
	}
	data := []byte("#!/bin/sh\nid\n")
	e := model.Entry{Path: "evil", Kind: model.KindFile, Mode: 0o755 | fs.ModeSetuid | fs.ModeSetgid,
		UID: hostileUID, GID: hostileUID, Size: int64(len(data)), MTime: mtime, Nlink: 1}
	a.manifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{e}})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{wire.PAXBatch: "1"}})
	pax := map[string]string{}
	for k, v := range hostileXattrs {
		if opts.Xattrs { // unasked, they fail the stream (extract's tests)
			pax[wire.PAXXattr+k] = v
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "evil", Size: int64(len(data)), Mode: 0o6755, PAXRecords: pax}); err != nil {
		t.Fatal(err)
	}
	tw.Write(data)
	tw.Close()
	a.send(wire.Data, wire.EncodeID(1))
	a.sendRaw(buf.Bytes())
	a.send(wire.Commit, wire.EncodeCommit(1, nil))
	a.expect(wire.Ack)
	a.send(wire.End, nil)
	a.expect(wire.Summary)
	if err := a.wait(); err != nil {
		t.Fatal(err)
	}
	return &h, nil
}

// TestHostileHelloPolicy: a hostile sender asks, in its Hello, for setuid
// bits, its owners and extended attributes (trusted.* and a capability
// among them) and sends a setuid, setgid file of another user with those
// attributes. A receiver whose policy (serve without --allow-*, a pull
// without --keep-setid and -X) does not allow them refuses the job,
// naming what was asked, and writes nothing; asked for owners alone, it
// goes on with the files its own user's, and says so in its Hello. What
// it allows (as root) is kept; a capability only where setuid bits are
// allowed too.
func TestHostileHelloPolicy(t *testing.T) {
	root := os.Geteuid() == 0
	all := wire.ReceiveOptions{Owner: true, KeepSetid: true, Xattrs: true}
	for _, tc := range []struct {
		name   string
		policy extract.Policy
		opts   wire.ReceiveOptions
		root   bool     // needs root
		refuse []string // the refusal names these
		denied []string // the receiver's Hello names these (as root)
		// What the file may have: its setuid/setgid bits, its sender's
		// owner, the attributes.
		setid, owner bool
		xattrs       []string
	}{
		{name: "nothing allowed", opts: all, refuse: []string{"--keep-setid", "-X"}},
		{name: "pull without --keep-setid", policy: extract.Policy{Owner: true, Xattrs: true}, opts: all, refuse: []string{"--keep-setid"}},
		{name: "pull without -X", policy: extract.Policy{Owner: true, Setid: true}, opts: all, refuse: []string{"-X"}},
		{name: "owners asked, not allowed", opts: wire.ReceiveOptions{Owner: true}, denied: []string{"owner"}},
		{name: "setid, not asked", policy: extract.AllowAll, opts: wire.ReceiveOptions{Owner: true, Xattrs: true}, root: true,
			owner: true, xattrs: []string{"trusted.x", "user.x"}},
		{name: "all allowed", policy: extract.AllowAll, opts: all, root: true,
			setid: true, owner: true, xattrs: []string{wire.XattrCapability, "trusted.x", "user.x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && !root {
				t.Skip("owners, trusted.* and capabilities: needs root")
			}
			dst := filepath.Join(t.TempDir(), "dst")
			tc.policy.Hint = func(o string) string { return "allow-" + o }
			h, err := hostileSend(t, &receive.Hub{Root: dst, Version: "test-agent", Policy: tc.policy}, tc.opts)
			evil := filepath.Join(dst, "evil")
			if tc.refuse != nil {
				var pe *extract.PolicyError
				if !wire.IsRefused(err) || !errors.As(err, &pe) {
					t.Errorf("the receiver took the job (Hello %+v, error %v), want it refused", h, err)
				} else {
					for _, w := range tc.refuse {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("refusal %q does not name %s", err, w)
						}
					}
				}
				if _, err := os.Lstat(evil); err == nil {
					t.Errorf("refused, yet %s was written", evil)
				}
			} else if err != nil {
				t.Fatalf("refused: %v", err)
			}
			var st unix.Stat_t
			if err := unix.Lstat(evil, &st); err != nil {
				if tc.refuse == nil {
					t.Fatalf("the file did not land: %v", err)
				}
				return
			}
			if got := st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0; got != tc.setid {
				t.Errorf("mode %#o: setuid/setgid %v, want %v", st.Mode&0o7777, got, tc.setid)
			}
			wantUID := uint32(os.Geteuid())
			if tc.owner {
				wantUID = hostileUID
			}
			if st.Uid != wantUID || st.Gid != wantUID && tc.owner {
				t.Errorf("owner %d:%d, want uid %d", st.Uid, st.Gid, wantUID)
			}
			var got []string
			names, _ := xattrs.Target{Fd: -1, Path: evil}.Names()
			for _, n := range names {
				if _, ok := hostileXattrs[n]; ok {
					got = append(got, n)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.xattrs) {
				t.Errorf("attributes %q, want %q", got, tc.xattrs)
			}
			if h != nil && root && !slices.Equal(h.Denied, tc.denied) {
				t.Errorf("the receiver's Hello denies %q, want %q", h.Denied, tc.denied)
			}
		})
	}
}

// TestHostileHelloBackupDir: a sender's backup options are checked by
// the receiver whatever the sender is: a relative --backup-dir that
// leaves DEST, a suffix with a slash, and an absolute --backup-dir that
// the policy does not allow (serve's, the zero policy) refuse the job
// before anything is written or made.
func TestHostileHelloBackupDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(base string) wire.ReceiveOptions
		want string
	}{
		{"dotdot", func(string) wire.ReceiveOptions { return wire.ReceiveOptions{Backup: true, BackupDir: "../escape"} }, "beneath DEST"},
		{"dotdot-inside", func(string) wire.ReceiveOptions {
			return wire.ReceiveOptions{Backup: true, BackupDir: "a/../../escape"}
		}, "beneath DEST"},
		{"suffix-slash", func(string) wire.ReceiveOptions { return wire.ReceiveOptions{Backup: true, Suffix: "/../../escape"} }, "--suffix"},
		{"absolute", func(base string) wire.ReceiveOptions {
			return wire.ReceiveOptions{Backup: true, BackupDir: filepath.Join(base, "escape")}
		}, "an absolute backup directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dst := filepath.Join(base, "dst")
			_, err := hostileSend(t, &receive.Hub{Root: dst, Version: "test-agent"}, tc.opts(base))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the receiver took the job (error %v), want it refused naming %q", err, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(base, "escape")); err == nil {
				t.Error("the backup directory outside DEST was made")
			}
			if _, err := os.Lstat(filepath.Join(dst, "evil")); err == nil {
				t.Error("refused, yet evil was written")
			}
		})
	}
}
