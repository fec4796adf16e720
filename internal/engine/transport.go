package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport/local"
	"github.com/bulkmove/bulkmove/wire"
)

// connect opens the K streams.
func (j *job) connect(ctx context.Context, p plan) ([]send.Conn, func(), error) {
	if j.serveAddr != "" {
		return j.connectServe(ctx, p)
	}
	if j.remote != nil {
		conns, l, err := j.connectSSH(ctx, *j.remote, p)
		if err != nil {
			return nil, nil, err
		}
		j.redial = l.redial
		if l.data == "" {
			g := l.growth()
			j.addConn, j.rtt, j.prepare = g.add, l.pathRTT, g.prepare
		}
		return conns, l.close, nil
	}
	if j.hub != nil {
		return j.connectHub(ctx, p)
	}
	ro := j.receiveOptions()
	if !j.flags.ViaAgent {
		recv, err := extract.Open(p.dstRoot, extract.FromWire(&ro))
		if err != nil {
			return nil, nil, fmt.Errorf("destination %s: %w", j.dst, Unwrap(err))
		}
		conns := make([]send.Conn, j.flags.Jobs)
		for i := range conns {
			conns[i] = &local.Conn{Recv: recv, Src: p.src}
		}
		j.addConn = func(context.Context, int) (send.Conn, error) { return &local.Conn{Recv: recv, Src: p.src}, nil }
		return conns, func() { recv.Close() }, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	var conns []send.Conn
	var cmds []*exec.Cmd
	cleanup := func() {
		for _, c := range cmds {
			c.Wait()
		}
	}
	for i := range j.flags.Jobs {
		cmd := exec.Command(self, slices.Concat([]string{"agent"}, j.flags.Gentle.NiceFlags.Args(), j.allowed().Args(), []string{"--", p.dstRoot})...)
		cmd.Stderr = j.stderr
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, err
		}
		r, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, nil, fmt.Errorf("start agent: %w", err)
		}
		cmds = append(cmds, cmd)
		c, err := send.Dial(ctx, fmt.Sprintf("stream %d", i), r, w, w, Version, ro, p.src)
		if err != nil {
			cleanup()
			return nil, nil, wire.RefusedBy("the agent", err)
		}
		j.configure(c)
		conns = append(conns, c)
	}
	return conns, cleanup, nil
}
