package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/direct"
	"github.com/bulkmove/bulkmove/transport/local"
	"github.com/bulkmove/bulkmove/transport/viaagent"
	"github.com/bulkmove/bulkmove/wire"
)

// connect chooses the job's transport, once (j.tr), and opens the K
// streams over it; cleanup closes the transport once the streams are
// closed.
func (j *job) connect(ctx context.Context, p plan) ([]send.Conn, func(), error) {
	if j.await != nil {
		path, err := j.await(ctx)
		if err != nil {
			return nil, nil, err
		}
		j.await = nil
		switch path.Via {
		case "tls":
			o, _ := dataplane.ParseOffer(path.Offer) // R2RSender's probe parsed it
			j.direct = &directDest{host: path.Host, name: path.Name, offer: o}
		case "accept":
			j.direct = &directDest{name: path.Name, offer: path.ln.Offer(), ln: path.ln, streams: path.Streams}
		}
	}
	tr, err := j.transport(p)
	if err != nil {
		return nil, nil, err
	}
	conns, err := tr.Open(ctx, j.flags.Jobs)
	if j.direct != nil && j.direct.ln != nil {
		j.direct.ln.Close() // all the agent dialled are in
	}
	if err != nil {
		tr.Close()
		return nil, nil, err
	}
	j.tr = tr
	return conns, func() { tr.Close() }, nil
}

// pending is how many of the job's streams the transport was still
// connecting when it returned the first ones (transport/ssh): the pool
// adds them as they come, while the first ones send.
func (j *job) pending() int {
	if p, ok := j.tr.(interface{ Pending() int }); ok {
		return p.Pending()
	}
	return 0
}

// transport is the transport DEST asks for: a serve daemon, an SSH host,
// the streams a puller opened (send-hub), agent processes here
// (--via-agent), or the receiver in this process.
func (j *job) transport(p plan) (transport.Transport, error) {
	switch {
	case j.direct != nil:
		t := &direct.Transport{Host: j.direct.host, Name: j.direct.name, Offer: j.direct.offer, Dialer: j.dialerFor(p)}
		if j.direct.ln != nil {
			t.DialConn = j.direct.accept
		}
		return t, nil
	case j.serveAddr != "":
		return j.serveTransport(p)
	case j.remote != nil:
		return j.sshTransport(*j.remote, p)
	case j.hub != nil:
		return j.hubTransport(p), nil
	case !j.flags.ViaAgent:
		ro := j.receiveOptions()
		t, err := local.New(p.dstRoot, extract.FromWire(&ro), p.src)
		if err != nil {
			return nil, fmt.Errorf("destination %s: %w", j.dst, paths.Unwrap(err))
		}
		return t, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := slices.Concat([]string{wire.CmdAgent}, j.flags.Gentle.NiceFlags.Args(), j.allowed().Args(), []string{"--", p.dstRoot})
	return &viaagent.Transport{Dialer: j.dialerFor(p), Command: func() *exec.Cmd {
		cmd := exec.Command(self, args...)
		cmd.Stderr = j.stderr
		return cmd
	}}, nil
}

// dialerFor is how the job's streams shake hands and are set up, whatever
// carries them.
func (j *job) dialerFor(p plan) *transport.Dialer {
	return &transport.Dialer{Version: Version, Options: j.receiveOptions(), Src: p.src, Configure: j.configure,
		Warnf:  func(format string, args ...any) { termsafe.Errorf(j.stderr, "warning: "+format, args...) },
		Tracef: j.trace}
}
