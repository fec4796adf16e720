package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/xattrs"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

// The hostile sender's file: setuid and setgid, owned by another user
// (hostileUID), with a user, a trusted and a capability attribute
// (cap_setuid+ep: whoever runs it may become root).
const hostileUID = 4242

var hostileAttrs = []string{"security.capability", "trusted.x", "user.x"}

// hostileSource makes the hostile sender's source: a file "evil" with
// hostileAttrs (as root: trusted.* and capabilities need it), and the
// entry it sends for it, which claims mode 06755 and hostileUID.
func hostileSource(t *testing.T, dir string) (source.Source, model.Entry) {
	t.Helper()
	for _, tool := range []string{"setfattr", "setcap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (apt-get install attr libcap2-bin)", tool)
		}
	}
	src := filepath.Join(dir, "hostile-src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "evil"), []byte("#!/bin/sh\nid\n"), 0o755)
	sh(t, src, "setfattr -n user.x -v u evil && setfattr -n trusted.x -v t evil && setcap cap_setuid+ep evil")
	fi, _ := os.Stat(filepath.Join(src, "evil"))
	e := model.Entry{Path: "evil", Kind: model.KindFile, Mode: 0o755 | os.ModeSetuid | os.ModeSetgid,
		UID: hostileUID, GID: hostileUID, Size: fi.Size(), MTime: fi.ModTime().UnixNano(), Nlink: 1}
	return source.Source{Root: src, Xattrs: true}, e
}

// hostilePush sends the hostile file to serve at addr, as job, into dest,
// with a Hello that asks for opts: the receiver's Hello, or its refusal.
func hostilePush(t *testing.T, addr, fp, tokFile, job, dest string, src source.Source, e model.Entry, opts wire.ReceiveOptions) (*send.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialServeJob(ctx, t, addr, fp, tokFile, job, dest)
	defer c.Close()
	src.Xattrs = opts.Xattrs // else the receiver fails the stream on the first attribute
	conn, err := send.Dial(ctx, job, c, c, c, engine.Version, opts, src)
	if err != nil {
		return nil, err
	}
	in := make(chan *model.Batch, 1)
	in <- &model.Batch{ID: 1, Entries: []model.Entry{e}, Bytes: e.Size}
	close(in)
	if _, err := conn.Run(ctx, in, func(send.Result) {}); err != nil {
		t.Fatalf("%s: %v", job, err)
	}
	if _, err := conn.Close(ctx); err != nil {
		t.Fatalf("%s: %v", job, err)
	}
	return conn, nil
}

// dialServeJob opens a stream to serve at addr (its certificate pinned by
// fp, the token in tokFile) and greets it for job and dest.
func dialServeJob(ctx context.Context, t *testing.T, addr, fp, tokFile, job, dest string) net.Conn {
	t.Helper()
	tok, err := dataplane.ReadToken(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := dataplane.ClientConfig("127.0.0.1", "", fp, "", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := dataplane.DialServe(ctx, addr, cfg, dataplane.Greeting{Token: tok, Job: job, Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fileView is what an operator checks of a file that landed: its
// setuid/setgid bits, its owner, and which of hostileAttrs it has.
func fileView(t *testing.T, p string) (setid bool, uid uint32, attrs []string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("the file did not land: %v", err)
	}
	names, _ := xattrs.Target{Fd: -1, Path: p}.Names()
	for _, n := range names {
		if slices.Contains(hostileAttrs, n) {
			attrs = append(attrs, n)
		}
	}
	slices.Sort(attrs)
	return st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0, st.Uid, attrs
}

// TestServeHostileHello: an authenticated sender (it has the token) asks,
// in its Hello, for setuid bits, its owners and extended attributes, and
// sends a setuid, setgid file of another user with a trusted attribute and
// a capability. serve without --allow-* refuses the job, naming the flags,
// and writes nothing; asked for owners alone it takes the job, the file
// its own user's (root's) without setuid bits or attributes, and the
// sender is told. With --allow-owner --allow-setid --allow-xattrs all is
// kept. An honest push with -X to the first serve is refused the same
// way, and one without is warned that owners are not kept.
func TestServeHostileHello(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("owners, trusted.* attributes and capabilities: only root can keep them, so only root's serve is at stake")
	}
	dir := shmDir(t)
	src, e := hostileSource(t, dir)
	all := wire.ReceiveOptions{Owner: true, KeepSetid: true, Xattrs: true}

	root := filepath.Join(dir, "root")
	addr, fp, tok := startServeBin(t, dir, "data="+root)
	_, err := hostilePush(t, addr, fp, tok, "job-all", "data/all", src, e, all)
	if !wire.IsRefused(err) {
		t.Errorf("serve took a job asking for setid bits, owners and attributes: %v", err)
	}
	for _, w := range []string{"--keep-setid", "-X", "serve --allow-setid", "serve --allow-xattrs"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal (%v) does not say %q", err, w)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "all/evil")); err == nil {
		setid, uid, attrs := fileView(t, filepath.Join(root, "all/evil"))
		t.Errorf("refused, yet the file landed: setid %v, uid %d, attributes %q", setid, uid, attrs)
	}

	c, err := hostilePush(t, addr, fp, tok, "job-owner", "data/owner", src, e, wire.ReceiveOptions{Owner: true})
	if err != nil {
		t.Fatalf("owners asked: %v, want the job taken", err)
	}
	if setid, uid, attrs := fileView(t, filepath.Join(root, "owner/evil")); setid || uid != 0 || len(attrs) > 0 {
		t.Errorf("owners asked, not allowed: setid %v, uid %d, attributes %q; want none, root's, none", setid, uid, attrs)
	}
	if !slices.Equal(c.Peer.Denied, []string{"owner"}) {
		t.Errorf("serve's Hello denies %q, want owner", c.Peer.Denied)
	}

	// The honest sender, to the same serve.
	plain := filepath.Join(dir, "plain")
	os.MkdirAll(plain, 0o755)
	os.WriteFile(filepath.Join(plain, "f"), []byte("data"), 0o644)
	out, code := runBM(t, nil, "-X", "--token-file", tok, "--fingerprint", fp, plain, "bulkmove://"+addr+"/data/x")
	if code != exitFatal || !strings.Contains(out, "refused: the sender asks for -X (extended attributes), which this receiver does not allow (serve --allow-xattrs)") {
		t.Errorf("-X to a serve without --allow-xattrs: exit %d, want 3 and the refusal:\n%s", code, out)
	}
	out, code = runBM(t, nil, "--token-file", tok, "--fingerprint", fp, plain, "bulkmove://"+addr+"/data/y")
	if code != 0 || !strings.Contains(out, "warning: bulkmove://"+addr+"/data/y: owners are not kept: the receiver does not allow them (serve --allow-owner)") {
		t.Errorf("a push to a serve without --allow-owner: exit %d, want 0 and a warning:\n%s", code, out)
	}

	dir2 := shmDir(t)
	root2 := filepath.Join(dir2, "root")
	p := startServeProc(t, dir2, []string{"--allow-owner", "--allow-setid", "--allow-xattrs"}, "data="+root2)
	addr, fp, tok = p.addr, p.fp, p.tok
	c, err = hostilePush(t, addr, fp, tok, "job-allowed", "data/all", src, e, all)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	if setid, uid, attrs := fileView(t, filepath.Join(root2, "all/evil")); !setid || uid != hostileUID || !slices.Equal(attrs, hostileAttrs) {
		t.Errorf("all allowed: setid %v, uid %d, attributes %q; want all kept", setid, uid, attrs)
	}
	if len(c.Peer.Denied) > 0 {
		t.Errorf("serve's Hello denies %q, want nothing", c.Peer.Denied)
	}
}

// TestAgentPolicyFromCommandLine: an agent keeps what its command line
// allows, whatever a Hello asks: started without --allow-setid (the
// sender gives it only with --keep-setid), a Hello asking for setid bits
// is refused, naming the agent's flag, and nothing lands; started with
// --allow-setid it is taken and the bits kept.
func TestAgentPolicyFromCommandLine(t *testing.T) {
	bin := testbin.Build(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o755)
	fi, _ := os.Stat(filepath.Join(src, "f"))
	e := model.Entry{Path: "f", Kind: model.KindFile, Mode: 0o755 | os.ModeSetuid, Size: fi.Size(), MTime: fi.ModTime().UnixNano(), Nlink: 1}
	for _, tc := range []struct {
		name  string
		flags []string
		setid bool
	}{{"without --allow-setid", nil, false}, {"with --allow-setid", []string{"--allow-setid"}, true}} {
		dst := filepath.Join(dir, tc.name)
		cmd := exec.Command(bin, append(append([]string{"--agent"}, tc.flags...), dst)...)
		w, _ := cmd.StdinPipe()
		r, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := send.Dial(ctx, "stream 0", r, w, w, engine.Version, wire.ReceiveOptions{KeepSetid: true}, source.Source{Root: src})
		if err == nil {
			in := make(chan *model.Batch, 1)
			in <- &model.Batch{ID: 1, Entries: []model.Entry{e}, Bytes: e.Size}
			close(in)
			if _, err = c.Run(ctx, in, func(send.Result) {}); err == nil {
				_, err = c.Close(ctx)
			}
		}
		w.Close()
		cmd.Wait()
		cancel()
		fi, serr := os.Stat(filepath.Join(dst, "f"))
		switch {
		case !tc.setid && (!wire.IsRefused(err) || !strings.Contains(err.Error(), "--keep-setid") || !strings.Contains(err.Error(), "agent --allow-setid")):
			t.Errorf("%s: %v, want the Hello refused, naming --keep-setid and agent --allow-setid", tc.name, err)
		case !tc.setid && serr == nil:
			t.Errorf("%s: refused, yet the file landed (mode %v)", tc.name, fi.Mode())
		case tc.setid && (err != nil || serr != nil || fi.Mode()&os.ModeSetuid == 0):
			t.Errorf("%s: %v, %v; want the file with its setuid bit", tc.name, err, serr)
		}
	}
}
