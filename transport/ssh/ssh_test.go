package ssh_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/faultproxy"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport"
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
	conformance(t, "", false)
}

// TestConformanceOpenSSH runs the suite against a push whose connections
// are the system's ssh processes (-e "ssh -F CONFIG"), through the same
// proxy: each stream its own ssh, the agent and the relays the same.
func TestConformanceOpenSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh (apt-get install openssh-client)")
	}
	conformance(t, "", true)
}

// TestConformanceDataPlane runs the suite against a push whose streams go
// over the agent's data plane (--transport tls, tcp): SSH starts the
// agent, through the proxy, and a lost stream comes back over SSH. The
// first data-plane stream passes a proxy of its own, which cuts or stalls
// it with the SSH connections.
func TestConformanceDataPlane(t *testing.T) {
	for _, mode := range []string{"tls", "tcp"} {
		t.Run(mode, func(t *testing.T) { conformance(t, mode, false) })
	}
}

func conformance(t *testing.T, data string, openSSH bool) {
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
		srv.TrustPort(t, p.Port()) // the proxy's address is a name of the server's key too
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
			var rsh *sshx.OpenSSH
			if openSSH {
				if rsh, err = sshx.NewOpenSSH("ssh -F "+cfg, target, opt); err != nil {
					t.Fatal(err)
				}
			}
			return ssh.New(ssh.Config{Target: target, Options: opt, OpenSSH: rsh, Dialer: env.Dialer, Root: env.Dst, RemoteBulkmove: remote, Data: data,
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

// proxiedPush is a push of transporttest's tree (src) to a new directory
// through a faultproxy in front of srv, the agent bin; share, if not nil,
// is its Config.Share.
func proxiedPush(t *testing.T, srv *sshdtest.Server, bin string, share func(time.Duration, bool) bool) (*faultproxy.Proxy, *ssh.Transport, string) {
	t.Helper()
	p, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv.TrustPort(t, p.Port())
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := transporttest.Tree(src); err != nil {
		t.Fatal(err)
	}
	target, _, err := sshx.ParseTarget("box2:" + dst)
	if err != nil {
		t.Fatal(err)
	}
	d := &transport.Dialer{Version: "test", Options: wire.ReceiveOptions{Check: wire.CheckQuick}, Src: source.Source{Root: src},
		Tracef: func(format string, args ...any) { t.Logf(format, args...) }}
	tr := ssh.New(ssh.Config{Target: target, Dialer: d, Root: dst, RemoteBulkmove: bin, Share: share,
		Options: sshx.Options{ConfigFile: srv.WriteSSHConfig("box2"), Batch: true, Stderr: os.Stderr, Port: p.Port()}})
	t.Cleanup(func() { tr.Close() })
	return p, tr, src
}

// TestFirstStreamEarly: over a path where every SSH handshake is slow,
// the job does not wait for the slowest: Open returns once the first
// connection is up and its stream ready, the others pending, and the
// first batch is acknowledged over it while the other connections have
// not even reached sshd. They join once they are up (Add), and carry
// their share.
func TestFirstStreamEarly(t *testing.T) {
	sshdtest.Require(t, "sshd")
	bin := testbin.Build(t)
	home := t.TempDir()
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH=/usr/bin:/bin", "HOME="+home))
	p, tr, src := proxiedPush(t, srv, bin, nil)
	p.HoldAfter(1) // every handshake but the first waits
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conns, err := tr.Open(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 1 || tr.Pending() != 3 {
		t.Fatalf("Open(4) with the other handshakes held: %d streams, %d pending; want 1, 3", len(conns), tr.Pending())
	}
	def := &send.Deferred{}
	defer def.Close()
	walked := make(chan *model.Batch, 1024)
	if _, err := sharder.Run(ctx, src, sharder.Options{BatchFiles: 4, Deferred: def.Add}, walked); err != nil {
		t.Fatal(err)
	}
	var acked sync.Once
	first := make(chan int, 1)
	var mu sync.Mutex
	var failed []string
	pool := &send.Pool{Conns: conns, Join: tr.Pending(), AddConn: tr.Add, OnResult: func(r send.Result) {
		if r.Ack == nil {
			return
		}
		acked.Do(func() { first <- p.Open() })
		mu.Lock()
		for _, e := range r.Ack.Errors {
			failed = append(failed, e.Msg)
		}
		mu.Unlock()
	}}
	// One batch first; the rest once the other streams joined, so that
	// they have work left.
	batches := make(chan *model.Batch)
	rest := make(chan struct{})
	go func() {
		defer close(batches)
		batches <- <-walked
		<-rest
		for b := range walked {
			batches <- b
		}
	}()
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(ctx, batches, def) }()
	select {
	case n := <-first:
		if n != 1 {
			t.Errorf("%d connections through to sshd at the first acknowledgement, want 1", n)
		}
	case err := <-ran:
		t.Fatalf("the job ended (%v) before its first acknowledgement", err)
	case <-ctx.Done():
		t.Fatal("no batch acknowledged while the other handshakes wait")
	}
	p.HoldAfter(0)
	for len(pool.Stats()) < 4 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d streams once the handshakes went on, want 4", len(pool.Stats()))
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(rest)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if len(failed) > 0 {
		t.Fatalf("entries failed: %q", failed)
	}
	var busy int
	for _, s := range pool.Stats()[1:] {
		if s.Files > 0 {
			busy++
		}
	}
	if busy == 0 {
		t.Error("no joined stream carried a file")
	}
}

// TestNearStreamsShare: over a near path (Config.Share says so), the
// streams Open leaves pending join as channels of the first SSH
// connection, and the connections dialed with it are closed: the job's
// streams all run over one connection, one sshd. Without Share each has
// a connection of its own.
func TestNearStreamsShare(t *testing.T) {
	sshdtest.Require(t, "sshd")
	bin := testbin.Build(t)
	home := t.TempDir()
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH=/usr/bin:/bin", "HOME="+home))
	for _, share := range []bool{true, false} {
		t.Run(fmt.Sprintf("share=%v", share), func(t *testing.T) {
			var asked sync.Once
			near := make(chan bool, 1)
			p, tr, src := proxiedPush(t, srv, bin, func(rtt time.Duration, ok bool) bool {
				asked.Do(func() { near <- ok })
				return share && ok
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const k = 3
			conns, err := tr.Open(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if ok := <-near; !ok {
				t.Fatal("Share was told the loopback round trip cannot be read")
			}
			for i, n := len(conns), len(conns)+tr.Pending(); i < n; i++ {
				c, err := tr.Add(ctx, i)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			if len(conns) != k {
				t.Fatalf("%d streams, want %d", len(conns), k)
			}
			want := k
			if share {
				want = 1
			}
			// The connections dialed with the first close once up: wait
			// for them (no fixed time), then for the job over the streams.
			for p.Open() != want {
				select {
				case <-ctx.Done():
					t.Fatalf("%d SSH connections open for %d streams, want %d", p.Open(), k, want)
				case <-time.After(10 * time.Millisecond):
				}
			}
			def := &send.Deferred{}
			defer def.Close()
			batches := make(chan *model.Batch, 1024)
			if _, err := sharder.Run(ctx, src, sharder.Options{BatchFiles: 2, Deferred: def.Add}, batches); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var failed []string
			pool := &send.Pool{Conns: conns, OnResult: func(r send.Result) {
				if r.Ack == nil {
					return
				}
				mu.Lock()
				for _, e := range r.Ack.Errors {
					failed = append(failed, e.Msg)
				}
				mu.Unlock()
			}}
			if err := pool.Run(ctx, batches, def); err != nil {
				t.Fatal(err)
			}
			if len(failed) > 0 {
				t.Fatalf("entries failed: %q", failed)
			}
			busy := 0
			for _, s := range pool.Stats() {
				if s.Files > 0 {
					busy++
				}
			}
			if busy < 2 {
				t.Errorf("%d of %d streams carried files, want 2 or more", busy, k)
			}
			if n := p.Open(); n != want {
				t.Errorf("%d SSH connections open at the end of the job, want %d", n, want)
			}
		})
	}
}
