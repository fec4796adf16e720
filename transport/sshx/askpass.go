package sshx

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// AskpassEnv names the socket an ssh process started by OpenSSH asks its
// prompts through; this binary, run by ssh as its SSH_ASKPASS with the
// variable set, is the asking side (AskpassMain).
const AskpassEnv = "BULKMOVE_ASKPASS_SOCKET"

// Askpass answers the prompts of the ssh processes of one job (-e) from
// this process's terminal: each question once, whatever number of
// processes ask it. ssh runs SSH_ASKPASS for a passphrase, a password, a
// host key's "continue connecting (yes/no)?" and a FIDO key's "confirm
// user presence" notice; with SSH_ASKPASS_REQUIRE=force (OpenSSH 8.4 and
// later) it does so even with a terminal, and this binary is that program
// (AskpassMain): it hands the prompt to this process over a Unix socket in
// a private directory, and prints the answer for ssh.
//
// An answer is kept for the job, in this process's memory only, and given
// to the next process that asks the same question. A process that asks
// again what it was already answered was answered wrongly (a mistyped
// passphrase): the user is asked again.
type Askpass struct {
	dir string
	ln  *net.UnixListener
	exe string
	// open opens the terminal (a variable for tests).
	open func() (terminal, error)

	mu      sync.Mutex
	answers map[string]string
	asked   map[string]map[int]bool // prompt -> the ssh processes answered
	wg      sync.WaitGroup          // the accepting loop
}

// NewAskpass starts answering prompts, if this process has a terminal to
// ask them on (else nil, and no error: ssh then fails as it would without
// one). Close stops it.
func NewAskpass() (*Askpass, error) {
	if !terminalAvailable() {
		return nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return newAskpass(exe, openTerminal)
}

func newAskpass(exe string, open func() (terminal, error)) (*Askpass, error) {
	dir, err := os.MkdirTemp("", "bulkmove-askpass-")
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	a := &Askpass{dir: dir, ln: ln, exe: exe, open: open, answers: map[string]string{}, asked: map[string]map[int]bool{}}
	a.wg.Go(a.serve)
	return a, nil
}

// env is environ with the variables that send an ssh's prompts here.
func (a *Askpass) env(environ []string) []string {
	if a == nil {
		return environ
	}
	out := make([]string, 0, len(environ)+3)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "SSH_ASKPASS=") && !strings.HasPrefix(kv, "SSH_ASKPASS_REQUIRE=") && !strings.HasPrefix(kv, AskpassEnv+"=") {
			out = append(out, kv)
		}
	}
	return append(out, "SSH_ASKPASS="+a.exe, "SSH_ASKPASS_REQUIRE=force", AskpassEnv+"="+a.ln.Addr().String())
}

// Close stops answering and forgets the answers.
func (a *Askpass) Close() error {
	if a == nil {
		return nil
	}
	a.ln.Close()
	a.wg.Wait()
	a.mu.Lock()
	a.answers, a.asked = nil, nil
	a.mu.Unlock()
	return os.RemoveAll(a.dir)
}

// askpassRequest is what the asking side sends, one JSON line.
type askpassRequest struct {
	Prompt string `json:"prompt"`
	Kind   string `json:"kind"` // SSH_ASKPASS_PROMPT: "" (a secret), "confirm", "none" (a notice)
	SSH    int    `json:"ssh"`  // the ssh process asking (the asker's parent)
}

type askpassReply struct {
	OK     bool   `json:"ok"`
	Answer string `json:"answer"`
}

func (a *Askpass) serve() {
	for {
		c, err := a.ln.AcceptUnix()
		if err != nil {
			return
		}
		// Not waited for by Close: one may be waiting for the user to type
		// at the terminal, and the job must be able to end meanwhile.
		go func() {
			defer c.Close()
			if !sameUser(c) {
				return
			}
			var req askpassRequest
			if err := json.NewDecoder(bufio.NewReader(c)).Decode(&req); err != nil {
				return
			}
			ans, err := a.answer(req)
			json.NewEncoder(c).Encode(askpassReply{OK: err == nil, Answer: ans})
		}()
	}
}

// sameUser is whether the peer runs as this process's user (the
// directory's mode already keeps others out).
func sameUser(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var uid uint32
	raw.Control(func(fd uintptr) { uid, err = peerUID(int(fd)) })
	return err == nil && int(uid) == os.Getuid()
}

// answer asks the user req's question, unless it was answered already
// for another process. Prompts are asked one at a time.
func (a *Askpass) answer(req askpassRequest) (string, error) {
	promptMu.Lock()
	defer promptMu.Unlock()
	a.mu.Lock()
	if a.answers == nil {
		a.mu.Unlock()
		return "", errors.New("closed")
	}
	ans, ok := a.answers[req.Prompt]
	again := a.asked[req.Prompt][req.SSH]
	a.mu.Unlock()
	if ok && !again {
		a.served(req)
		return ans, nil
	}
	t, err := a.open()
	if err != nil {
		return "", err
	}
	defer t.Close()
	prompt := termPrompt(req.Prompt)
	switch {
	case req.Kind == "none":
		// A notice (touch the key): shown once, nothing to answer.
		if !ok {
			t.Println(prompt)
		}
		ans = ""
	case req.Kind == "confirm" || strings.Contains(req.Prompt, "(yes/no"):
		ans, err = t.ReadLine(prompt)
	default:
		var b []byte
		b, err = t.ReadPassword(prompt)
		ans = string(b)
	}
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	if a.answers == nil { // closed while the user typed
		a.mu.Unlock()
		return "", errors.New("closed")
	}
	a.answers[req.Prompt] = ans
	a.asked[req.Prompt] = map[int]bool{} // a new answer: every process may have it
	a.mu.Unlock()
	a.served(req)
	return ans, nil
}

func (a *Askpass) served(req askpassRequest) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.asked == nil {
		return
	}
	if a.asked[req.Prompt] == nil {
		a.asked[req.Prompt] = map[int]bool{}
	}
	a.asked[req.Prompt][req.SSH] = true
}

// termPrompt is ssh's prompt as the terminal shows it: what the remote
// side chose in it (a keyboard-interactive prompt) cannot move the cursor
// or change the terminal.
func termPrompt(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r == '\n' || r == '\t' || r >= 0x20 && r != 0x7f && !(r >= 0x80 && r < 0xa0) {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "\\x%02x", r)
		}
	}
	return b.String()
}

// AskpassMain is this binary run by ssh as its SSH_ASKPASS (the prompt
// in args, AskpassEnv set): it asks the bulkmove that started the ssh,
// prints the answer and returns 0, or returns 1 (ssh then takes the
// question as refused). ok is false when this is not such a run.
func AskpassMain(args []string) (code int, ok bool) {
	sock := os.Getenv(AskpassEnv)
	if sock == "" || len(args) != 1 {
		return 0, false
	}
	req := askpassRequest{Prompt: args[0], Kind: os.Getenv("SSH_ASKPASS_PROMPT"), SSH: os.Getppid()}
	ans, err := ask(sock, req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bulkmove askpass: %v\n", err)
		return 1, true
	}
	if req.Kind != "none" {
		fmt.Println(ans)
	}
	return 0, true
}

// ask asks req of the Askpass listening on sock.
func ask(sock string, req askpassRequest) (string, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return "", err
	}
	var rep askpassReply
	if err := json.NewDecoder(c).Decode(&rep); err != nil {
		return "", err
	}
	if !rep.OK {
		return "", errors.New("not answered")
	}
	return rep.Answer, nil
}
