package engine

import (
	"context"
	"os"
	"path"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/transport/ssh"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// SSHConfig are the flags of the SSH transport, named as ssh(1) names them.
type SSHConfig struct {
	Port           int
	Identities     StringList
	Config         string
	Jump           string
	AcceptNew      bool
	PasswordAuth   bool
	RemoteBulkmove string
	Linger         time.Duration
	// ForwardAgent is --forward-agent: a remote-to-remote move's box1
	// may log in to box2 with this host's SSH agent.
	ForwardAgent bool
	// Rsh is -e: the command (the system's OpenSSH, with options) that
	// runs the remote commands, in place of the built-in client.
	Rsh string
}

func (s *SSHConfig) options(stderrIsTerminal bool) sshx.Options {
	return sshx.Options{
		Port: s.Port, Identities: s.Identities, ConfigFile: s.Config, Jump: s.Jump,
		AcceptNewHostKey: s.AcceptNew, PasswordAuth: s.PasswordAuth, Batch: !stderrIsTerminal,
	}
}

// sshTransport is the transport of a push to host t: the agent it starts
// there, how its streams travel (--transport), and -j auto's start
// (nearStart, farAhead, nearShare) once the first connection's round trip
// is known.
func (j *job) sshTransport(t sshx.Target, p plan) (*ssh.Transport, error) {
	opt := j.flags.SSH.options(isTerminal(os.Stdin))
	opt.Stderr = j.stderr
	rsh, err := j.openSSH(t, opt)
	if err != nil {
		return nil, err
	}
	linger := j.flags.SSH.Linger
	if rsh != nil && linger > 0 {
		// A lingering agent is joined through the built-in client's
		// forwarding, which a COMMAND does not offer.
		termsafe.Errorf(j.stderr, "warning: --linger is for the built-in SSH client; ignored with -e")
		linger = 0
	}
	return ssh.New(ssh.Config{Target: t, Options: opt, OpenSSH: rsh, Dialer: j.dialerFor(p), Root: p.dstRoot, SrcIDs: j.srcIDs(p),
		Nice: j.flags.Gentle.NiceFlags.Text(), AllowFlags: j.allowed().Text(), Allow: wire.Allow(j.allowed()),
		Data: j.flags.Transport, DataAddr: j.flags.DataAddr, DataPorts: j.flags.DataPorts,
		Linger: linger, RemoteBulkmove: j.flags.SSH.RemoteBulkmove,
		Fit: j.nearStart, Ahead: j.farAhead, Share: j.nearShare}), nil
}

// openSSH is the system's OpenSSH client -e names for host t, or nil
// without -e. Its Close ends what it holds (the prompts' answers).
func (j *job) openSSH(t sshx.Target, opt sshx.Options) (*sshx.OpenSSH, error) {
	if j.flags.SSH.Rsh == "" {
		return nil, nil
	}
	if j.flags.SSH.PasswordAuth {
		termsafe.Errorf(j.stderr, "warning: --password-auth is for the built-in SSH client; with -e, ssh's configuration decides")
	}
	return sshx.NewOpenSSH(j.flags.SSH.Rsh, t, opt)
}

// srcIDs is the --src-ids an agent is started with: SRC by device and
// inode, and this machine, for the agent to refuse a ROOT that overlaps
// it on the same machine. "" if this machine has no machine-id.
func (j *job) srcIDs(p plan) string {
	h := paths.HostPlace{Machine: paths.HostID()}
	if h.Machine == "" || p.srcReal == "" {
		return ""
	}
	pl, err := paths.PlaceOf(j.src, p.srcReal)
	if err != nil {
		return ""
	}
	h.Place = pl
	if p.src.File != "" {
		h.As = p.rename
	}
	return h.Encode()
}

// remoteDest fills the plan for a remote DEST: the receiver's root is the
// remote path; a single-file SRC goes into it if it is a directory there.
func (j *job) remoteDest(ctx context.Context, t sshx.Target, p *plan) {
	p.dstRoot = t.Path
	if p.rename == "" {
		return
	}
	// A single file: into DEST if DEST ends in '/' (a directory),
	// else as DEST.
	if t.Path == "" || strings.HasSuffix(t.Path, "/") {
		p.dstRoot = t.Path
		return
	}
	p.dstRoot, p.rename = path.Dir(t.Path), path.Base(t.Path)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
