package serve_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/bulkmove/bulkmove/internal/faultproxy"
	rserve "github.com/bulkmove/bulkmove/receive/serve"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/serve"
	"github.com/bulkmove/bulkmove/transport/transporttest"
)

const testToken = "4be0c1a97d2f83e65a1b0c9d7e3f2a41b8c6d5e09f1a2b3c"

// TestConformance runs the transport suite against a serve daemon in this
// process (receive/serve), whose root "data" holds the destination. Every
// stream goes through a proxy that cuts or stalls them all: the transport
// redials each. The refused handshakes: a wrong token, an unknown root,
// and a server of another protocol version.
func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, env transporttest.Env) transporttest.Setup {
		addr, fp := daemon(t, filepath.Dir(env.Dst))
		p, err := faultproxy.Start(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		tokens := t.TempDir()
		token := filepath.Join(tokens, "token")
		wrong := filepath.Join(tokens, "wrong")
		os.WriteFile(token, []byte(testToken+"\n"), 0o600)
		os.WriteFile(wrong, []byte("9a8b7c6d5e4f30211f2e3d4c5b6a79880d1c2b3a49586776\n"), 0o600)
		dest := "data/" + filepath.Base(env.Dst)
		mk := func(addr, dest, tokenFile, fp string) *serve.Transport {
			tr, err := serve.New(addr, dest, serve.Credentials{TokenFile: tokenFile, Fingerprint: fp}, env.Dialer)
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
		otherAddr, otherFP := otherServer(t)
		return transporttest.Setup{
			Transport: mk(p.Addr(), dest, token, fp),
			Cut:       p.CutAll,
			Stall: func(on bool) {
				if !on {
					p.CutAll()
				}
				p.Stall(on)
			},
			Refused: []transporttest.Refusal{
				{Name: "wrong token", Transport: mk(addr, dest, wrong, fp), Want: "refused: wrong token"},
				{Name: "unknown root", Transport: mk(addr, "elsewhere/"+filepath.Base(env.Dst), token, fp), Want: `no root named "elsewhere"`},
				{Name: "other protocol", Transport: mk(otherAddr, dest, token, otherFP), Want: "protocol version mismatch"},
			},
		}
	})
}

// daemon runs a serve daemon with the root "data" at dir until the test
// ends, and returns its address and its certificate's fingerprint.
func daemon(t *testing.T, dir string) (addr, fingerprint string) {
	t.Helper()
	roots, err := rserve.OpenRoots(map[string]string{"data": dir})
	if err != nil {
		t.Fatal(err)
	}
	cfg, fp, err := dataplane.ServerConfig("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	s := rserve.New(rserve.Config{Roots: roots, Token: testToken, TLS: cfg, Limits: rserve.DefaultLimits, Version: "serve",
		Logf: func(format string, a ...any) { t.Logf(format, a...) }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		<-done
		for _, r := range roots {
			r.Close()
		}
	})
	return ln.Addr().String(), fp
}

// otherServer answers every stream as a serve daemon of another protocol
// version would, until the test ends.
func otherServer(t *testing.T) (addr, fingerprint string) {
	t.Helper()
	cfg, fp, err := dataplane.ServerConfig("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				c := tls.Server(raw, cfg)
				defer c.Close()
				if _, err := dataplane.ReadGreeting(c); err == nil {
					transporttest.OtherProtocol(c, c)
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String(), fp
}
