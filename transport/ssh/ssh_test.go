package ssh_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/bulkmove/bulkmove/internal/faultproxy"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/ssh"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/transport/transporttest"
	"github.com/bulkmove/bulkmove/wire"
)

// TestMain removes, when the tests end, the bulkmove testbin.Build makes:
// the agent the transport starts on the "remote" host (this one, through a
// real sshd).
func TestMain(m *testing.M) { os.Exit(testbin.WithCleanup(m).Run()) }

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
	conformance(t, "")
}

// TestConformanceDataPlane runs the suite against a push whose streams go
// over the agent's data plane (--transport tls, tcp): SSH starts the
// agent, through the proxy, and a lost stream comes back over SSH. The
// first data-plane stream passes a proxy of its own, which cuts or stalls
// it with the SSH connections.
func TestConformanceDataPlane(t *testing.T) {
	for _, mode := range []string{"tls", "tcp"} {
		t.Run(mode, func(t *testing.T) { conformance(t, mode) })
	}
}

func conformance(t *testing.T, data string) {
	sshdtest.Require(t, "sshd")
	bin := testbin.Build(t)
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
		dp := &dataProxy{t: t}
		mk := func(remote string, proxied bool) *ssh.Transport {
			target, _, err := sshx.ParseTarget("box2:" + env.Dst)
			if err != nil {
				t.Fatal(err)
			}
			opt := sshx.Options{ConfigFile: cfg, Batch: true, Stderr: os.Stderr}
			if proxied {
				opt.Port = p.Port()
			}
			return ssh.New(ssh.Config{Target: target, Options: opt, Dialer: env.Dialer, Root: env.Dst, RemoteBulkmove: remote, Data: data,
				DialData: dp.dial})
		}
		s := transporttest.Setup{
			Transport: mk(bin, true),
			Cut:       func() { p.CutAll(); dp.cutAll() },
			Stall: func(on bool) {
				if !on {
					p.CutAll()
					dp.cutAll()
				}
				p.Stall(on)
				dp.stall(on)
			},
			Refused: []transporttest.Refusal{
				{Name: "other protocol", Want: "speaks protocol \"" + strconv.Itoa(otherProto) + "\", this bulkmove speaks " + strconv.Itoa(wire.Proto),
					Transport: mk(script(t, fmt.Sprintf("case \"$1\" in version) echo %d;; *) echo 'BULKMOVE-HUB /nowhere job=x';; esac\n", otherProto)), false)},
				{Name: "job refused", Want: "refused the job: not today",
					Transport: mk(script(t, "echo 'BULKMOVE-REFUSED not today'\n"), false)},
			},
		}
		return s
	})
}

// otherProto is the protocol the stand-in of another version speaks.
const otherProto = 99

// dataProxy puts a proxy in front of the first data-plane stream, made
// when it is dialled (the agent's port is known only then).
type dataProxy struct {
	t  *testing.T
	mu sync.Mutex
	p  *faultproxy.Proxy
}

func (d *dataProxy) dial(ctx context.Context, host string, o dataplane.Offer, i int) (net.Conn, error) {
	if i == 0 {
		p, err := faultproxy.Start(net.JoinHostPort(host, strconv.Itoa(o.Port)))
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		if d.p != nil {
			d.p.Close()
		}
		d.p = p
		d.mu.Unlock()
		d.t.Cleanup(func() { p.Close() })
		o.Port = p.Port()
	}
	return dataplane.Dial(ctx, host, o, i)
}

func (d *dataProxy) proxy() *faultproxy.Proxy {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.p
}

func (d *dataProxy) cutAll() {
	if p := d.proxy(); p != nil {
		p.CutAll()
	}
}

func (d *dataProxy) stall(on bool) {
	if p := d.proxy(); p != nil {
		p.Stall(on)
	}
}
