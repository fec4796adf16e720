package accepted_test

import (
	"context"
	"io"
	"testing"

	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/transport/accepted"
	"github.com/bulkmove/bulkmove/transport/transporttest"
)

// TestConformance runs the transport suite against streams open before
// the job, as a pull's send-hub gets them: links in this process to one
// receiving hub, the first of which is cut or stalled.
func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, env transporttest.Env) transporttest.Setup {
		h := &receive.Hub{Root: env.Dst, Version: "agent"}
		links := newLinks(t, 3, func(r io.Reader, w io.Writer) error { return h.Serve(context.Background(), r, w) })
		other := newLinks(t, 2, func(r io.Reader, w io.Writer) error { return transporttest.OtherProtocol(r, w) })
		return transporttest.Setup{
			Transport: &accepted.Transport{Streams: streams(links), Dialer: env.Dialer},
			Cut:       links[0].Cut,
			Stall: func(on bool) {
				if !on {
					links[0].Cut() // what it held is lost
				}
				links[0].Stall(on)
			},
			Refused: []transporttest.Refusal{{Name: "other protocol",
				Transport: &accepted.Transport{Streams: streams(other), Dialer: env.Dialer},
				Want:      "protocol version mismatch"}},
		}
	})
}

func newLinks(t *testing.T, n int, serve func(io.Reader, io.Writer) error) []*transporttest.Link {
	ls := make([]*transporttest.Link, n)
	for i := range ls {
		ls[i] = transporttest.NewLink(serve)
		t.Cleanup(func() { ls[i].Close() })
	}
	return ls
}

func streams(ls []*transporttest.Link) []accepted.Stream {
	var ss []accepted.Stream
	for _, l := range ls {
		ss = append(ss, accepted.Stream{R: l.R, W: l.W, C: l.C})
	}
	return ss
}
