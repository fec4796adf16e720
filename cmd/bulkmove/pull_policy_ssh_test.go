package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestSSHPullHostileSender: the remote host of a pull is hostile: its
// bulkmove (here a wrapper, --remote-bulkmove) starts the sender with
// --keep-setid and -X added, --no-owner dropped, and its SRC holds a
// setuid, setgid file of another user with a trusted attribute and a
// capability. The pull's flags are the receiver's policy: without
// --keep-setid and -X the pull is refused, naming what the sender asked,
// and nothing lands; with --no-owner (the sender asking for owners all
// the same) the file is the puller's own, without setuid bits or
// attributes; with --keep-setid -X all is kept.
func TestSSHPullHostileSender(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("owners, trusted.* attributes and capabilities: only root can keep them, so only root's pull is at stake")
	}
	bin := testbin.Build(t)
	dir := shmDir(t)
	src, _ := hostileSource(t, dir)
	evil := filepath.Join(src.Root, "evil")
	// As the entry claims: owned by hostileUID, 06755 (chown first: it
	// clears the setuid bits and the capability).
	sh(t, src.Root, "setcap -r evil && chown 4242:4242 evil && chmod 06755 evil && setcap cap_setuid+ep evil")
	extra := filepath.Join(dir, "extra")
	wrapper := filepath.Join(dir, "hostile-bulkmove")
	// The hostile sender runs with the options it chooses: the --config
	// in extra (if any) in place of the one the puller gave.
	os.WriteFile(wrapper, []byte(`#!/bin/sh
if [ "$1" = --send-hub ]; then
	shift
	sub=$(cat '`+extra+`')
	args=""
	while [ $# -gt 0 ]; do
		if [ "$1" = --config ] && [ -n "$sub" ]; then
			args="$args --config '$sub'"
			shift 2
			continue
		fi
		args="$args '$1'"
		shift
	done
	eval exec "'`+bin+`'" --send-hub $args
fi
exec '`+bin+`' "$@"
`), 0o755)
	// asks is the Config of a sender that asks for what set gives.
	asks := func(set func(*engine.Config)) string {
		c := engine.DefaultConfig()
		c.Jobs = 2
		set(&c)
		s, err := engine.EncodeSenderConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH=/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	pull := func(sends, dst string, flags ...string) (string, int) {
		os.WriteFile(extra, []byte(sends), 0o644)
		return runBM(t, nil, append(append([]string{"--ssh-config", cfg, "-j", "2", "--journal", "none", "--remote-bulkmove", wrapper}, flags...), "box2:"+src.Root, filepath.Join(dir, dst))...)
	}

	out, code := pull(asks(func(c *engine.Config) { c.KeepSetid, c.Faithful.Xattrs = true, true }), "plain")
	if code != exitFatal || !strings.Contains(out, "bulkmove: pull from box2: the remote sender is refused: the sender asks for --keep-setid, -X (extended attributes), which this receiver does not allow (a pull with --keep-setid, a pull with -X)") {
		t.Errorf("a pull without --keep-setid and -X: exit %d, want it refused, naming both:\n%s", code, out)
	}
	if _, err := os.Lstat(filepath.Join(dir, "plain/evil")); err == nil {
		setid, uid, attrs := fileView(t, filepath.Join(dir, "plain/evil"))
		t.Errorf("refused, yet the file landed: setid %v, uid %d, attributes %q", setid, uid, attrs)
	}

	if out, code := pull(asks(func(*engine.Config) {}), "noowner", "--no-owner"); code != 0 {
		t.Fatalf("a pull with --no-owner: exit %d:\n%s", code, out)
	}
	if setid, uid, attrs := fileView(t, filepath.Join(dir, "noowner/evil")); setid || uid != 0 || len(attrs) > 0 {
		t.Errorf("a pull with --no-owner: setid %v, uid %d, attributes %q; want none, root's, none", setid, uid, attrs)
	}

	if out, code := pull("", "kept", "--keep-setid", "-X"); code != 0 {
		t.Fatalf("a pull with --keep-setid -X: exit %d:\n%s", code, out)
	}
	if setid, uid, attrs := fileView(t, filepath.Join(dir, "kept/evil")); !setid || uid != hostileUID || !slices.Equal(attrs, hostileAttrs) {
		t.Errorf("a pull with --keep-setid -X: setid %v, uid %d, attributes %q; want all kept", setid, uid, attrs)
	}
	if setid, uid, _ := fileView(t, evil); !setid || uid != hostileUID {
		t.Fatalf("the source is not as the test made it: setid %v, uid %d", setid, uid)
	}
}
