// Package viaagent is the transport of --via-agent: K `bulkmove --agent`
// processes on this host, one a stream, each spoken to over its standard
// input and output with the wire protocol. It is the SSH path without SSH:
// what a push sends and an agent receives, on one machine, for tests and
// for a destination this process should not write itself.
//
// Each agent is a job of its own (a receiver of its own), so a stream that
// is lost cannot come back to the same receiver: this transport neither
// redials nor adds streams.
package viaagent

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport"
)

// Transport runs an agent process for each stream.
type Transport struct {
	transport.Fixed
	// Command returns the command of a new agent serving one stream on
	// its standard input and output (which Open connects); its standard
	// error is the command's to set.
	Command func() *exec.Cmd
	Dialer  *transport.Dialer

	mu     sync.Mutex
	cmds   []*exec.Cmd
	opened transport.Opened
}

// Open implements transport.Transport: k agents, started one after the
// other. A stream whose agent does not start or answer fails the job.
func (t *Transport) Open(ctx context.Context, k int) ([]send.Conn, error) {
	var conns []send.Conn
	for i := range k {
		c, err := t.start(ctx, i)
		if err != nil {
			t.Close()
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func (t *Transport) start(ctx context.Context, i int) (*send.Client, error) {
	cmd := t.Command()
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	t.mu.Lock()
	t.cmds = append(t.cmds, cmd)
	t.mu.Unlock()
	c, err := t.Dialer.Dial(ctx, fmt.Sprintf("stream %d", i), "the agent", r, w, w)
	if err != nil {
		return nil, err
	}
	t.opened.Add(c)
	return c, nil
}

// Close implements transport.Transport: it drops the streams the pool did
// not close (their agents see their input end) and waits for every agent
// to exit. An agent's failure is its stream's, reported there: not
// Close's.
func (t *Transport) Close() error {
	t.opened.Abort()
	t.mu.Lock()
	cmds := t.cmds
	t.cmds = nil
	t.mu.Unlock()
	var errs []error
	for _, c := range cmds {
		if err := c.Wait(); err != nil && !isExit(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isExit says whether err is a process's exit status (not a failure to
// wait for it).
func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}
