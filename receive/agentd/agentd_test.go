package agentd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

func init() { detach = func() {} } // the test's own stdio stays

// agent is an agent run by a test: its first stream's input (stdin), its
// banner, and Run's result once it ends.
type agent struct {
	stdin  *io.PipeWriter
	banner wire.AgentBannerFields
	line   string      // the first line it printed
	rest   chan string // the lines it printed after
	done   chan error
}

// startAgent runs an agent with cfg in a private HOME of the test's, and
// reads its first line.
func startAgent(t *testing.T, cfg Config) *agent {
	t.Helper()
	home, err := os.MkdirTemp("", "bm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	t.Setenv("HOME", home)
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_STATE_HOME", "")
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	cfg.Version = "test"
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &agent{stdin: inW, rest: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		err := Run(ctx, cfg, inR, outW)
		outW.Close()
		a.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		select {
		case <-a.done:
		case <-time.After(10 * time.Second):
			t.Error("the agent still runs 10 s after it was stopped")
		}
	})
	br := bufio.NewReader(outR)
	a.line, _ = br.ReadString('\n')
	go func() {
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				select {
				case a.rest <- l:
				default: // not read by the test
				}
			}
			if err != nil {
				return
			}
		}
	}()
	if strings.HasPrefix(a.line, wire.AgentBanner) {
		if a.banner, err = wire.ParseAgentBanner(a.line); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// dial connects to the agent's socket and runs the sender's side of the
// handshake.
func (a *agent) dial(t *testing.T, verb, key string) (net.Conn, *bufio.Reader, error) {
	t.Helper()
	c, err := net.Dial("unix", a.banner.Sock)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	if err := wire.ProveToHub(c, br, verb, key); err != nil {
		c.Close() // as a sender does: the agent waits for no proof
		return nil, nil, err
	}
	return c, br, nil
}

// wait returns Run's result, failing the test if it takes more than 10 s.
func (a *agent) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-a.done:
		a.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not end")
		return nil
	}
}

// TestAgentJoin: the banner names a socket in this user's private
// directory and the job's token; a stream that proves the token joins,
// one naming another job is refused, and a new job is refused by an agent
// that does not linger. The agent ends with its job and removes its socket.
func TestAgentJoin(t *testing.T) {
	a := startAgent(t, Config{Streams: 2})
	if a.banner.Job == "" || a.banner.Linger != "" {
		t.Fatalf("banner %q: want a job's token and no linger token", a.line)
	}
	if want := filepath.Join(os.Getenv("HOME"), ".local", "state", "bulkmove", "run"); filepath.Dir(a.banner.Sock) != want {
		t.Fatalf("socket %s, want it in %s", a.banner.Sock, want)
	}
	if _, _, err := a.dial(t, wire.HubJoin, wire.NewToken()); err == nil || !strings.Contains(err.Error(), "no such job") {
		t.Errorf("joining another job: %v, want refused", err)
	}
	if _, _, err := a.dial(t, wire.HubNew, wire.NewToken()); err == nil || !strings.Contains(err.Error(), "not lingering") {
		t.Errorf("a new job: %v, want refused", err)
	}
	c, _, err := a.dial(t, wire.HubJoin, a.banner.Job)
	if err != nil {
		t.Fatalf("joining the job: %v", err)
	}
	c.Close()
	a.stdin.Close()
	a.wait(t)
	if _, err := os.Stat(a.banner.Sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s left after the agent ended: %v", a.banner.Sock, err)
	}
}

// TestAgentLingerNewJob: a lingering agent takes a new job from a
// connection that proves it holds the linger token, and gives it the next
// token in its banner; the token used works no more, nor a job asking for
// another --nice, and a job that asks to linger no more ends the agent.
func TestAgentLingerNewJob(t *testing.T) {
	a := startAgent(t, Config{Streams: 1, Linger: time.Minute, Nice: " --io-nice"})
	if a.banner.Linger == "" {
		t.Fatalf("banner %q: no linger token", a.line)
	}
	a.stdin.Close() // the first job ends; the agent lingers
	newJob := func(key string, req wire.NewJob) (banner string, err error) {
		c, br, err := a.dial(t, wire.HubNew, key)
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(req)
		fmt.Fprintf(c, "%s\n", b)
		line, err := wire.ReadHubLine(br)
		if why, ok := strings.CutPrefix(line, wire.Refused); ok {
			return "", errors.New(why)
		}
		c.Close() // the new job's one stream: the job ends
		return line, err
	}
	root := t.TempDir()
	if _, err := newJob(a.banner.Linger, wire.NewJob{Root: root, Linger: time.Minute}); err == nil || !strings.Contains(err.Error(), `this agent runs with " --io-nice", the job asks for ""`) {
		t.Fatalf("a new job asking for another --nice: %v, want refused", err)
	}
	// That request used the token up as well: the next is not known to
	// the sender that asked, and a new agent would be started.
	if _, err := newJob(a.banner.Linger, wire.NewJob{Root: root, Nice: " --io-nice"}); !errors.Is(err, wire.ErrNotAgent) {
		t.Fatalf("a new job with a used linger token: %v, want ErrNotAgent", err)
	}
}

// TestAgentLingerTokenRotates: each new job on a lingering agent gets the
// next linger token; the one it used works no more.
func TestAgentLingerTokenRotates(t *testing.T) {
	a := startAgent(t, Config{Streams: 1, Linger: time.Minute})
	a.stdin.Close()
	tok := a.banner.Linger
	for i := range 2 {
		c, br, err := a.dial(t, wire.HubNew, tok)
		if err != nil {
			t.Fatalf("new job %d: %v", i, err)
		}
		b, _ := json.Marshal(wire.NewJob{Root: t.TempDir(), Linger: time.Minute})
		fmt.Fprintf(c, "%s\n", b)
		line, err := wire.ReadHubLine(br)
		if err != nil {
			t.Fatal(err)
		}
		nb, err := wire.ParseAgentBanner(line)
		if err != nil || nb.Linger == "" || nb.Linger == tok || nb.Sock != a.banner.Sock {
			t.Fatalf("new job %d: banner %q, %v; want the same socket and a new linger token", i, line, err)
		}
		c.Close()
		if _, _, err := a.dial(t, wire.HubNew, tok); !errors.Is(err, wire.ErrNotAgent) {
			t.Fatalf("the used linger token: %v, want ErrNotAgent", err)
		}
		tok = nb.Linger
	}
	// A job that asks to linger no more (Linger 0) is the agent's last.
	c, br, err := a.dial(t, wire.HubNew, tok)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(wire.NewJob{Root: t.TempDir()})
	fmt.Fprintf(c, "%s\n", b)
	if _, err := wire.ReadHubLine(br); err != nil {
		t.Fatal(err)
	}
	c.Close()
	a.wait(t)
}

// TestAgentRefusesInPlaceOfBanner: a ROOT refused (CheckRoot), or no
// private directory for the socket, is said on stdout in place of the
// banner, for the sender to show; a refused ROOT is a UsageError.
func TestAgentRefusesInPlaceOfBanner(t *testing.T) {
	a := startAgent(t, Config{Streams: 1, CheckRoot: func(root, srcIDs string) (string, error) {
		return "", fmt.Errorf("on this host, %s overlaps %s", root, srcIDs)
	}, SrcIDs: "SRC"})
	var usage *UsageError
	if !strings.HasPrefix(a.line, wire.Refused+"on this host, ") || !errors.As(a.wait(t), &usage) {
		t.Fatalf("a refused ROOT: printed %q; want %q first, and a UsageError", a.line, wire.Refused)
	}

	home, err := os.MkdirTemp("", "bm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	os.Chmod(home, 0o777)
	t.Setenv("HOME", home)
	var out strings.Builder
	err = Run(context.Background(), Config{Streams: 1, Root: t.TempDir()}, strings.NewReader(""), &out)
	if !strings.HasPrefix(out.String(), wire.Refused) || !strings.Contains(out.String(), "writable by group or others: refused") || err == nil {
		t.Fatalf("no private directory: printed %q, %v; want it refused in place of the banner", out.String(), err)
	}
}

// TestAgentDialsSender: an agent with a data plane, asked on stdin to
// dial a sender that listens (a remote-to-remote move where only that
// direction is open), opens its K streams there and says how many; it
// refuses a listener whose certificate is not the offer's (another
// process on that port: it would write into DEST), and a request it
// cannot read, saying why.
func TestAgentDialsSender(t *testing.T) {
	a := startAgent(t, Config{Streams: 2, Data: dataplane.TLS, DataAddr: "127.0.0.1"})
	if a.banner.Offer == "" {
		t.Fatalf("no data plane in the banner %q", a.line)
	}
	ask := func(req string) string {
		t.Helper()
		if _, err := io.WriteString(a.stdin, wire.AgentDial+req+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case l := <-a.rest:
			return strings.TrimSpace(l)
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer to %q", req)
			return ""
		}
	}
	if got := ask("junk"); !strings.HasPrefix(got, wire.Refused) || !strings.Contains(got, "bad dial request") {
		t.Errorf("a request it cannot read: answered %q", got)
	}
	ln, err := dataplane.Listen(dataplane.TLS, "127.0.0.1", "", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.Admit()
	other, err := dataplane.Listen(dataplane.TLS, "127.0.0.1", "", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	forged := other.Offer()
	forged.Port = ln.Offer().Port // ln's port, another certificate
	if got := ask("127.0.0.1 " + forged.String()); !strings.HasPrefix(got, wire.Refused) || !strings.Contains(got, "not the sender the control host started") {
		t.Errorf("a listener with another certificate: answered %q", got)
	}
	if got := ask("127.0.0.1 " + ln.Offer().String()); got != strings.TrimSpace(wire.AgentDialed)+" 2" {
		t.Fatalf("the sender's listener: answered %q, want %q", got, wire.AgentDialed+"2")
	}
	for range 2 {
		c, _, err := ln.Accept()
		if err != nil {
			t.Fatalf("a stream the agent said it opened: %v", err)
		}
		c.Close()
	}
}

// countingReader is an endless stream of the bytes 0, 1, 2, ... (mod
// 251), counting what was read of it.
type countingReader struct{ n atomic.Int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	off := c.n.Load()
	for i := range p {
		p[i] = byte((off + int64(i)) % 251)
	}
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// The agent reads its streams up to 2 MiB ahead of the receiving, which
// stops to hash and write: what the sender's SSH window lets through
// waits in the agent, not in sshd's buffer (which sshd moves for each
// packet). What is read ahead comes out whole and in order.
func TestInterruptibleReadsAhead(t *testing.T) {
	src := &countingReader{}
	ctx, cancel := context.WithCancel(context.Background())
	r := interruptible(ctx, src)
	want := int64(aheadChunk * aheadBufs)
	deadline := time.Now().Add(10 * time.Second)
	for src.n.Load() < want && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if got := src.n.Load(); got < want {
		t.Fatalf("read %d bytes ahead of a reader that read nothing, want %d", got, want)
	}
	p := make([]byte, want+1000)
	if _, err := io.ReadFull(r, p); err != nil {
		t.Fatal(err)
	}
	for i, b := range p {
		if b != byte(i%251) {
			t.Fatalf("byte %d is %d, want %d", i, b, i%251)
		}
	}
	cancel() // (context.AfterFunc closes it soon after)
	for {
		if _, err := r.Read(p); err == io.ErrClosedPipe {
			break
		} else if err != nil || time.Now().After(deadline) {
			t.Fatalf("reads after the context ended: %v, want %v", err, io.ErrClosedPipe)
		}
	}
}
