package ssh_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/bulkmove/bulkmove/internal/faultproxy"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/transport/ssh"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/transport/transporttest"
	"github.com/bulkmove/bulkmove/wire"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// binary builds bulkmove once: the agent the transport starts on the
// "remote" host (this one, through a real sshd).
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bulkmove-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "bulkmove")
		out, err := exec.Command("go", "build", "-o", builtBin, "github.com/bulkmove/bulkmove/cmd/bulkmove").CombinedOutput()
		if err != nil {
			buildErr, builtBin = err, string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, builtBin)
	}
	return builtBin
}

// script writes an executable shell script that stands for a remote
// bulkmove, and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bulkmove")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConformance runs the transport suite against a push over a real
// sshd, the agent being the bulkmove built from this tree. Every SSH
// connection goes through a proxy, which cuts or stalls them all: the
// transport redials each. The refused handshakes: an agent of another
// protocol version, and one that refuses the job.
func TestConformance(t *testing.T) {
	sshdtest.Require(t, "sshd")
	bin := binary(t)
	transporttest.Run(t, func(t *testing.T, env transporttest.Env) transporttest.Setup {
		home := t.TempDir()
		srv := sshdtest.Start(t, sshdtest.WithEnv("PATH=/usr/bin:/bin", "HOME="+home))
		p, err := faultproxy.Start(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		// The proxy's address is a name of the server's key too.
		kh, err := os.OpenFile(srv.KnownHostsFile, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(kh, "[127.0.0.1]:%d %s\n", p.Port(), srv.HostKeyLine)
		kh.Close()
		cfg := srv.WriteSSHConfig("box2")
		mk := func(remote string, proxied bool) *ssh.Transport {
			target, _, err := sshx.ParseTarget("box2:" + env.Dst)
			if err != nil {
				t.Fatal(err)
			}
			opt := sshx.Options{ConfigFile: cfg, Batch: true, Stderr: os.Stderr}
			if proxied {
				opt.Port = p.Port()
			}
			return ssh.New(ssh.Config{Target: target, Options: opt, Dialer: env.Dialer, Root: env.Dst, RemoteBulkmove: remote})
		}
		return transporttest.Setup{
			Transport: mk(bin, true),
			Cut:       p.CutAll,
			Stall: func(on bool) {
				if !on {
					p.CutAll()
				}
				p.Stall(on)
			},
			Refused: []transporttest.Refusal{
				{Name: "other protocol", Want: "speaks protocol \"" + strconv.Itoa(otherProto) + "\", this bulkmove speaks " + strconv.Itoa(wire.Proto),
					Transport: mk(script(t, fmt.Sprintf("case \"$1\" in version) echo %d;; *) echo 'BULKMOVE-HUB /nowhere job=x';; esac\n", otherProto)), false)},
				{Name: "job refused", Want: "refused the job: not today",
					Transport: mk(script(t, "echo 'BULKMOVE-REFUSED not today'\n"), false)},
			},
		}
	})
}

// otherProto is the protocol the stand-in of another version speaks.
const otherProto = 99
