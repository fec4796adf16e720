package direct_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bulkmove/bulkmove/internal/faultproxy"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/direct"
	"github.com/bulkmove/bulkmove/transport/transporttest"
)

// TestConformance runs the transport suite against streams over an
// agent's data plane, TLS and TCP. The receiving end is the agent's: a
// data-plane listener whose streams one hub serves. Stream 0 goes through
// a proxy that cuts or stalls it.
func TestConformance(t *testing.T) {
	for _, mode := range []dataplane.Mode{dataplane.TLS, dataplane.TCP} {
		t.Run(string(mode), func(t *testing.T) {
			transporttest.Run(t, func(t *testing.T, env transporttest.Env) transporttest.Setup {
				// One hub, one receiver, for the job's streams.
				h := &receive.Hub{Root: env.Dst, Version: "agent"}
				offer := agent(t, mode, func(c net.Conn) error { return h.Serve(context.Background(), c, c) })
				p, err := faultproxy.Start(net.JoinHostPort("127.0.0.1", strconv.Itoa(offer.Port)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				tr := &direct.Transport{Host: "127.0.0.1", Offer: offer, Dialer: env.Dialer,
					DialConn: func(ctx context.Context, host string, o dataplane.Offer, i int) (net.Conn, error) {
						if i == 0 {
							o.Port = p.Port()
						}
						return dataplane.Dial(ctx, host, o, i)
					}}
				wrongToken := offer
				wrongToken.Token = strings.Repeat("0", len(offer.Token))
				s := transporttest.Setup{Transport: tr, Cut: p.CutAll, Stall: stall(p),
					Refused: []transporttest.Refusal{
						{Name: "wrong token", Transport: &direct.Transport{Host: "127.0.0.1", Offer: wrongToken, Dialer: env.Dialer},
							Want: "not this job's token"},
						{Name: "other protocol", Transport: &direct.Transport{Host: "127.0.0.1", Dialer: env.Dialer,
							Offer: agent(t, mode, func(c net.Conn) error { return transporttest.OtherProtocol(c, c) })},
							Want: "protocol version mismatch"},
					}}
				if mode == dataplane.TLS {
					pin := offer
					pin.Fingerprint = strings.Repeat("ab", 32)
					s.Refused = append(s.Refused, transporttest.Refusal{Name: "wrong certificate",
						Transport: &direct.Transport{Host: "127.0.0.1", Offer: pin, Dialer: env.Dialer},
						Want:      "not the agent SSH started"})
				}
				return s
			})
		})
	}
}

// agent listens on a data plane as the agent does and serves each stream
// it admits with serve, until the test ends.
func agent(t *testing.T, mode dataplane.Mode, serve func(net.Conn) error) dataplane.Offer {
	t.Helper()
	l, err := dataplane.Listen(mode, "127.0.0.1", "", 8)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, _, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return l.Offer()
}

// stall stalls the proxy's connections (on), or drops them and lets new
// ones through (off).
func stall(p *faultproxy.Proxy) func(on bool) {
	return func(on bool) {
		if !on {
			p.CutAll()
		}
		p.Stall(on)
	}
}
