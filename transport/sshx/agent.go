package sshx

import (
	"context"
	"errors"

	"github.com/bulkmove/bulkmove/transport/sshx/agentbin"
)

// EnsureAgent finds a usable bulkmove on the remote, or installs this one
// in the remote's per-user cache, and returns the path to run it by: see
// agentbin.Ensure, which keeps the cache's safety rules.
func (c *Client) EnsureAgent(ctx context.Context, remotePath, version string, wantProto int, localBinary string) (string, error) {
	return agentbin.Ensure(ctx, agentRemote{c}, remotePath, version, wantProto, localBinary)
}

// agentRemote is the Client as agentbin.Remote.
type agentRemote struct{ *Client }

func (r agentRemote) Start(ctx context.Context, cmd string) (agentbin.Stdin, error) {
	s, err := r.Client.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (r agentRemote) ExitStatus(err error) (status int, stderr string, ok bool) {
	var xe *ExitError
	if !errors.As(err, &xe) {
		return 0, "", false
	}
	return xe.Status, xe.Stderr, true
}

func (r agentRemote) Note(msg string) { r.notes.print(msg) }
func (r agentRemote) Warn(msg string) { r.notes.warn(msg) }
