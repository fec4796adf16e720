package wire

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// handshake runs ProveToHub (verb, key) against AcceptHub (keys: the
// hub's key per verb, "" for none) on a pipe, and returns both sides'
// results and what the hub's side read after the handshake.
func handshake(t *testing.T, verb, key string, keys map[string]string) (proveErr error, gotVerb string, ok bool, after string) {
	t.Helper()
	c, h := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReader(h)
		gotVerb, _, ok = AcceptHub(h, br, func(verb, id string) (string, string) {
			k := keys[verb]
			switch {
			case k == "":
				return "", "not lingering"
			case verb == HubJoin && id != JobID(k):
				return "", "no such job"
			}
			return k, ""
		})
		if ok {
			after, _ = ReadHubLine(br)
			h.Close()
		}
	}()
	br := bufio.NewReader(c)
	proveErr = ProveToHub(c, br, verb, key)
	if proveErr == nil {
		io.WriteString(c, "after\n")
	}
	c.Close()
	<-done
	return proveErr, gotVerb, ok, after
}

// TestHubHandshake: a connection that holds the key and a hub that holds
// it prove it to each other, and the stream goes on; a wrong key, an
// unknown job or a hub that does not serve the verb is refused before
// anything else is sent, the reason told to the connecting side.
func TestHubHandshake(t *testing.T) {
	job, linger := NewToken(), NewToken()
	keys := map[string]string{HubJoin: job, HubNew: linger}
	for _, c := range []struct {
		name, verb, key string
		keys            map[string]string
		want            string // in ProveToHub's error; "" if it succeeds
	}{
		{"join", HubJoin, job, keys, ""},
		{"new", HubNew, linger, keys, ""},
		{"join another job", HubJoin, NewToken(), keys, "no such job"},
		{"new with the wrong token", HubNew, NewToken(), keys, "did not prove it is the agent"},
		{"new, not lingering", HubNew, linger, map[string]string{HubJoin: job}, "not lingering"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err, verb, ok, after := handshake(t, c.verb, c.key, c.keys)
			if c.want == "" {
				if err != nil || !ok || verb != c.verb || after != "after" {
					t.Fatalf("ProveToHub: %v; AcceptHub: %q, %v; then read %q", err, verb, ok, after)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || ok {
				t.Fatalf("ProveToHub: %v, want %q; AcceptHub ok %v", err, c.want, ok)
			}
		})
	}
}

// TestHubRefusesBadProof: a connection that sends a proof it did not
// compute is refused, and one that does not get a proof from the hub
// sends nothing else (ErrNotAgent).
func TestHubRefusesBadProof(t *testing.T) {
	c, h := net.Pipe()
	refusal := make(chan string, 1)
	go func() {
		br := bufio.NewReader(c)
		io.WriteString(c, HubNew+" "+NewToken()+"\n")
		ReadHubLine(br)
		io.WriteString(c, HubProof+strings.Repeat("0", 64)+"\n")
		refusal <- func() string { l, _ := ReadHubLine(br); return l }()
		c.Close()
	}()
	key := NewToken()
	_, _, ok := AcceptHub(h, bufio.NewReader(h), func(string, string) (string, string) { return key, "" })
	if got := <-refusal; ok || got != Refused+"bad proof" {
		t.Fatalf("a wrong proof: taken %v, answered %q", ok, got)
	}

	c2, h2 := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReader(h2)
		ReadHubLine(br)
		io.WriteString(h2, HubProof+NewToken()+" "+strings.Repeat("0", 64)+"\n")
		if line, err := ReadHubLine(br); err == nil {
			t.Errorf("the connecting side sent %q after a wrong proof", line)
		}
	}()
	if err := ProveToHub(c2, bufio.NewReader(c2), HubJoin, key); !errors.Is(err, ErrNotAgent) {
		t.Errorf("ProveToHub to a hub with a wrong proof: %v, want ErrNotAgent", err)
	}
	c2.Close()
	<-done
}

// TestReadHubLineCap: a line longer than HubMaxLine is refused.
func TestReadHubLineCap(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", HubMaxLine+1)+"\n"), 16)
	if _, err := ReadHubLine(br); err == nil {
		t.Fatal("an over-long line was read")
	}
	br = bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", HubMaxLine-1)+"\n"), 16)
	if l, err := ReadHubLine(br); err != nil || len(l) != HubMaxLine-1 {
		t.Fatalf("a line of %d bytes: %d, %v", HubMaxLine, len(l), err)
	}
}

// TestAgentBanner: a banner reads back as it was written; one without a
// job is refused, quoted without its tokens.
func TestAgentBanner(t *testing.T) {
	b := AgentBannerFields{Sock: "/run/user/0/bulkmove/agent-x.sock", Job: NewToken(), Linger: NewToken(), Offer: "data=tls:50000:abcd:" + NewToken()}
	got, err := ParseAgentBanner(b.String() + "\n")
	if err != nil || got != b {
		t.Fatalf("ParseAgentBanner(%q) = %+v, %v", b.String(), got, err)
	}
	b.Job = ""
	_, err = ParseAgentBanner(b.String())
	if err == nil {
		t.Fatal("a banner without a job was taken")
	}
	for _, secret := range []string{b.Linger, b.Offer[len("data="):]} {
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:12]) {
			t.Errorf("the error shows a token: %v", err)
		}
	}
	if !strings.Contains(err.Error(), "linger=...") || !strings.Contains(err.Error(), "agent-x.sock") {
		t.Errorf("the error no longer shows the banner's shape: %v", err)
	}
}
