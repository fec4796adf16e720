package sshx

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptTerm is a terminal that answers from a list, and records what it
// showed.
type scriptTerm struct {
	mu      *sync.Mutex
	answers *[]string
	shown   *[]string
}

func (s scriptTerm) next(prompt string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.shown = append(*s.shown, prompt)
	if len(*s.answers) == 0 {
		return ""
	}
	a := (*s.answers)[0]
	*s.answers = (*s.answers)[1:]
	return a
}

func (s scriptTerm) ReadPassword(prompt string) ([]byte, error) { return []byte(s.next(prompt)), nil }
func (s scriptTerm) ReadLine(prompt string) (string, error)     { return s.next(prompt), nil }
func (s scriptTerm) Println(msg string)                         { s.next(msg) }
func (s scriptTerm) Close() error                               { return nil }

// TestAskpass: the ssh processes of a job ask through the socket as
// AskpassMain does; the user is asked a question once whatever number of
// processes ask it, again when a process asks again what it was answered
// (a mistyped passphrase), a FIDO notice is shown once, and a prompt's
// control characters (a keyboard-interactive prompt is the server's) do
// not reach the terminal.
func TestAskpass(t *testing.T) {
	var mu sync.Mutex
	answers := []string{"wrong", "right", "yes"}
	var shown []string
	a, err := newAskpass("/bin/false", func() (terminal, error) {
		return scriptTerm{&mu, &answers, &shown}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sock := a.ln.Addr().String()
	const pp = "Enter passphrase for key '/home/u/.ssh/id': "
	askOK := func(pid int, prompt, kind string) string {
		t.Helper()
		ans, err := ask(sock, askpassRequest{Prompt: prompt, Kind: kind, SSH: pid})
		if err != nil {
			t.Fatalf("ssh %d: %v", pid, err)
		}
		return ans
	}
	if got := askOK(100, pp, ""); got != "wrong" {
		t.Fatalf("first answer %q", got)
	}
	// ssh 100 asks again: its answer was wrong; the user is asked anew.
	if got := askOK(100, pp, ""); got != "right" {
		t.Fatalf("asked again: %q, want the new answer", got)
	}
	var wg sync.WaitGroup
	for pid := 101; pid <= 103; pid++ {
		wg.Go(func() {
			if got, err := ask(sock, askpassRequest{Prompt: pp, SSH: pid}); err != nil || got != "right" {
				t.Errorf("ssh %d: %q, %v; want the answer typed once", pid, got, err)
			}
		})
	}
	wg.Wait()
	hostKey := "The authenticity of host 'box2' can't be established.\nAre you sure you want to continue connecting (yes/no/[fingerprint])? "
	if got := askOK(104, hostKey, ""); got != "yes" {
		t.Errorf("host key question: %q", got)
	}
	if got := askOK(105, hostKey, ""); got != "yes" {
		t.Errorf("host key question, second process: %q", got)
	}
	notice := "Confirm user presence for key ED25519-SK SHA256:x\x1b[2J"
	askOK(106, notice, "none")
	askOK(107, notice, "none")
	mu.Lock()
	defer mu.Unlock()
	want := []string{pp, pp, hostKey, "Confirm user presence for key ED25519-SK SHA256:x\\x1b[2J"}
	if strings.Join(shown, "|") != strings.Join(want, "|") {
		t.Errorf("the terminal showed %q, want %q", shown, want)
	}
	a.Close()
	if _, err := ask(sock, askpassRequest{Prompt: pp, SSH: 108}); err == nil {
		t.Error("answered after Close")
	}
}

// blockTerm is a terminal whose user has not typed yet.
type blockTerm struct {
	asked   chan<- struct{}
	release <-chan struct{}
}

func (b blockTerm) ReadPassword(string) ([]byte, error) {
	b.asked <- struct{}{}
	<-b.release
	return []byte("late"), nil
}
func (b blockTerm) ReadLine(string) (string, error) { return "", nil }
func (b blockTerm) Println(string)                  {}
func (b blockTerm) Close() error                    { return nil }

// TestAskpassCloseWhileAsking: the job can end (^C at the prompt, the
// ssh gone) while the user has not answered: Close does not wait for the
// terminal, and the answer typed after it is given to no one.
func TestAskpassCloseWhileAsking(t *testing.T) {
	asked, release := make(chan struct{}), make(chan struct{})
	a, err := newAskpass("/bin/false", func() (terminal, error) { return blockTerm{asked, release}, nil })
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := ask(a.ln.Addr().String(), askpassRequest{Prompt: "Password: ", SSH: 1})
		got <- err
	}()
	<-asked
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the user to type")
	}
	close(release)
	if err := <-got; err == nil {
		t.Error("an answer typed after Close was given")
	}
}
