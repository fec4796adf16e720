package sshx

import (
	"context"
	"fmt"
	"net"
	"os"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// ListenRemote asks the remote sshd to listen on addr on its host (as
// ssh -R does; "127.0.0.1:0" for a port it chooses) and returns the
// listener of the connections it forwards back over this connection. A
// remote-to-remote move relays its streams through it when no direct
// path works.
func (c *Client) ListenRemote(addr string) (net.Listener, error) {
	l, err := c.ssh.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: asking sshd to listen on %s (AllowTcpForwarding?): %w", c.alias, addr, err)
	}
	return l, nil
}

// DialRemote opens a TCP connection from the remote host to addr,
// through sshd's forwarding (as ssh -L does).
func (c *Client) DialRemote(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := c.ssh.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: forwarding to %s: %w", c.alias, addr, err)
	}
	return conn, nil
}

// ForwardAgent makes this host's SSH agent ($SSH_AUTH_SOCK) reachable
// from the sessions started after it (as ssh -A does), for a remote
// command that logs in further with the keys held here.
func (c *Client) ForwardAgent() error {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return fmt.Errorf("ssh %s: --forward-agent: no SSH agent here (SSH_AUTH_SOCK is not set)", c.alias)
	}
	if err := agent.ForwardToRemote(c.ssh, sock); err != nil {
		return fmt.Errorf("ssh %s: --forward-agent: %w", c.alias, err)
	}
	return nil
}

// StartOwn is Start for a remote bulkmove whose messages are this
// command's own (a remote-to-remote move's sender): its stderr's lines
// come without the host's prefix. With forward, the session asks for the
// forwarding ForwardAgent set up.
func (c *Client) StartOwn(ctx context.Context, cmd string, forward bool) (*Session, error) {
	var setup func(*ssh.Session) error
	if forward {
		setup = func(s *ssh.Session) error { return agent.RequestAgentForwarding(s) }
	}
	return c.startWith(ctx, cmd, c.stderr, "", setup)
}
