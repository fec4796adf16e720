package ssh

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/internal/linger"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/transport/sshx/agentbin"
	"github.com/bulkmove/bulkmove/wire"
)

// RefusedError is a job the agent refused (it printed wire.Refused in
// place of its banner), with the reason it gave.
type RefusedError struct {
	Host, Why string
}

func (r *RefusedError) Error() string { return fmt.Sprintf("%s refused the job: %s", r.Host, r.Why) }

func isJobRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

func isVersion(err error) bool { return errors.Is(err, wire.ErrVersion) }

// readBanner reads the agent hub's banner line, or the NoAgent line,
// skipping what a login script may print before (up to 64 lines or 16
// KiB, returned as junk).
func readBanner(br *bufio.Reader) (line, junk string, err error) {
	var skipped strings.Builder
	for range 64 {
		line, err = br.ReadString('\n')
		if err != nil || strings.HasPrefix(line, wire.AgentBanner) || strings.HasPrefix(line, wire.SenderBanner) ||
			strings.HasPrefix(line, wire.Refused) || strings.TrimSpace(line) == agentbin.NoAgent {
			return line, strings.TrimSpace(skipped.String()), err
		}
		if skipped.Len()+len(line) > 16<<10 {
			break
		}
		skipped.WriteString(line)
	}
	return "", strings.TrimSpace(skipped.String()), errors.New("no agent banner among the first lines it printed")
}

// BannerTimeout bounds the wait for a hub's first line (the agent's
// banner, or a send-hub's).
const BannerTimeout = 30 * time.Second

// start starts the agent hub on clients[0] and opens the job's k streams
// to it: one over every client, or k over its data plane. banner says
// whether the hub started.
func (t *Transport) start(ctx context.Context, clients []sshx.Link, k int) (conns []send.Conn, banner bool, err error) {
	d := t.cfg.Dialer
	host := clients[0].Host()
	sess, err := clients[0].StartQuiet(ctx, t.cmd)
	if err != nil {
		return nil, false, err
	}
	br := bufio.NewReader(sess)
	// An agent that does not announce itself (not a bulkmove that knows
	// --hub, or one that hangs) must not hang the job.
	timer := time.AfterFunc(BannerTimeout, func() { sess.Close() })
	line, junk, rerr := readBanner(br)
	timer.Stop()
	if junk != "" {
		d.Warn("ssh %s: the remote shell printed %q before the agent started (a login script writing to stdout?); ignored", host, junk)
	}
	if rerr == nil && strings.HasPrefix(line, wire.SenderBanner) {
		// An older agent (PATH's): its socket takes a token from whoever
		// asks. EnsureAgent finds one of this protocol.
		sess.Close()
		return nil, true, fmt.Errorf("ssh %s: the agent there is an older bulkmove: %w", host, wire.ErrVersion)
	}
	if rerr != nil || !strings.HasPrefix(line, wire.AgentBanner) {
		sess.CloseWrite()
		werr := sess.Wait()
		sess.Close()
		if why, ok := strings.CutPrefix(line, wire.Refused); ok {
			return nil, false, &RefusedError{Host: "ssh " + host, Why: strings.TrimSpace(why)}
		}
		if strings.TrimSpace(line) == agentbin.NoAgent {
			return nil, false, fmt.Errorf("ssh %s: no bulkmove on the remote PATH", host)
		}
		return nil, false, fmt.Errorf("ssh %s: the agent did not start (it printed %q): %w", host, strings.TrimSpace(junk+line), errors.Join(rerr, werr))
	}
	sess.ShowStderr()
	b, err := t.banner(host, line)
	if err != nil {
		sess.Close()
		return nil, true, err
	}
	if b.Linger != "" && t.lingerAt != "" {
		if err := linger.Save(t.lingerAt, linger.Record{Sock: b.Sock, Token: b.Linger}); err != nil {
			d.Warn("%v; the next push will start a new agent", err)
		}
	}
	if b.Offer != "" && t.data != "" {
		offer, err := dataplane.ParseOffer(b.Offer)
		if err != nil {
			sess.Close()
			return nil, true, fmt.Errorf("ssh %s: %w", host, err)
		}
		if t.handOff {
			t.mu.Lock()
			t.hubSess, t.hubOut, t.clients = sess, br, []sshx.Link{clients[0]}
			t.handed = &Agent{Host: t.dataHost(clients[0]), Name: host, Offer: offer}
			t.mu.Unlock()
			return nil, true, nil
		}
		conns, err := t.startData(ctx, clients[0], sess, offer, k)
		return conns, true, err
	}
	conns, err = t.open(ctx, clients, br, sess)
	return conns, true, err
}

// banner parses the hub's banner line and notes where its streams join.
func (t *Transport) banner(host, line string) (wire.AgentBannerFields, error) {
	b, err := wire.ParseAgentBanner(line)
	if err != nil {
		return b, fmt.Errorf("ssh %s: %w", host, err)
	}
	t.mu.Lock()
	t.sock, t.job = b.Sock, b.Job
	agent := t.agent
	t.mu.Unlock()
	if agent == "" {
		agent = "bulkmove" // AgentCommand's: the remote PATH's, or the cached upload
	}
	t.cfg.Dialer.Trace("agent %s ready on %s", agent, host)
	return b, nil
}

// startLingering opens the job's streams to an agent a push with --linger
// left on the host, if this host has its record and it still answers: a new
// job on its socket, over clients[0]'s forwarding, then the other streams
// join it. ok is false if that cannot be done (the agent has ended, the
// host rebooted, sshd forbids forwarding, or whatever listens there does
// not prove it holds the record's token): the caller starts an agent as
// usual. Nothing is sent to the socket before it proved itself (see
// wire.ProveToHub). The job gets the agent's next token, saved in place of
// the one used, which works no more. With --linger the agent stays again
// after this job, without it this job is its last.
func (t *Transport) startLingering(ctx context.Context, clients []sshx.Link, binary, root string) (conns []send.Conn, ok bool) {
	d := t.cfg.Dialer
	at, err := linger.Path(clients[0].Endpoint(), binary)
	if err != nil {
		return nil, false
	}
	if t.cfg.Linger > 0 {
		t.lingerAt = at
	}
	// One push at a time uses the record: the token it holds works once.
	unlock, err := linger.Lock(at)
	if err != nil {
		d.Trace("%v", err)
		return nil, false
	}
	defer func() { unlock() }() // unlock is a no-op once called
	rec := linger.Load(at)
	if rec == nil {
		return nil, false
	}
	host := clients[0].Host()
	fail := func(why error) ([]send.Conn, bool) {
		d.Trace("no lingering agent on %s (%v): starting one", host, why)
		os.Remove(at)
		return nil, false
	}
	rw, err := clients[0].Forward(ctx, rec.Sock)
	if err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(rw, wire.HubMaxLine)
	timer := time.AfterFunc(BannerTimeout, func() { rw.Close() })
	line, err := "", wire.ProveToHub(rw, br, wire.HubNew, rec.Token)
	if err == nil {
		req, _ := json.Marshal(wire.NewJob{Root: root, Linger: t.cfg.Linger, Nice: t.cfg.Nice, SrcIDs: t.cfg.SrcIDs, Allow: t.cfg.Allow})
		if _, err = fmt.Fprintf(rw, "%s\n", req); err == nil {
			line, err = wire.ReadHubLine(br)
		}
	}
	timer.Stop()
	if err == nil && !strings.HasPrefix(line, wire.AgentBanner) {
		err = fmt.Errorf("%q", line)
	}
	var b wire.AgentBannerFields
	if err == nil {
		b, err = t.banner(host, line)
	}
	if err == nil && b.Linger == "" {
		err = errors.New("no next linger token in its banner")
	}
	if err != nil {
		rw.Close()
		return fail(fmt.Errorf("%s: %w", rec.Sock, err))
	}
	d.Trace("joined the agent lingering on %s", host)
	if t.cfg.Linger > 0 {
		if err := linger.Save(at, linger.Record{Sock: rec.Sock, Token: b.Linger}); err != nil {
			d.Warn("%v; the next push will start a new agent", err)
		}
	} else {
		os.Remove(at) // it ends with this job
	}
	unlock() // the next push may go on: the record holds the next token
	conns, err = t.open(ctx, clients, br, rw)
	if err != nil {
		d.Trace("the agent lingering on %s: %v: starting one", host, err)
		return nil, false
	}
	return conns, true
}
