package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Every connection to an agent hub's socket starts with a proof, both
// ways, that the other end holds the key: the job's token for a stream
// joining a running job (JOIN2), the lingering agent's token for a new job
// (NEW2). The socket's path may name something else than the agent the
// sender knew (the agent ended and another user made the path again), so
// the sender sends no token, no request and no data before the agent has
// proved itself, and the agent serves nothing before the sender has:
//
//	sender: JOIN2 JOBID NONCE_S      (or NEW2 NONCE_S)
//	agent:  PROOF NONCE_A HMAC(key, "agent" VERB JOBID NONCE_S NONCE_A)
//	sender: PROOF HMAC(key, "sender" VERB JOBID NONCE_S NONCE_A)
//
// then, for JOIN2, the stream; for NEW2, the request (JSON) on one line,
// answered by the agent's banner with the new job's token and the next
// linger token (the one just used no longer works), or a refusal. JOBID
// names the job without giving its token away (an HMAC of it); the two
// nonces make each proof good for one connection only.

// hubProofLine starts the agent's proof and the sender's.
const hubProofLine = "PROOF "

// hubMaxLine bounds a line of the handshake, either side.
const hubMaxLine = 4096

// jobID names a job on the socket: the token's HMAC, which gives nothing
// of the token away.
func jobID(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	io.WriteString(m, "bulkmove hub job id")
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// hubProof is one side's proof of key for a connection.
func hubProof(key, side, verb, id, nonceS, nonceA string) string {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "bulkmove hub 2\x00%s\x00%s\x00%s\x00%s\x00%s", side, verb, id, nonceS, nonceA)
	return hex.EncodeToString(m.Sum(nil))
}

// proofOK compares a proof received with the one expected, in constant
// time.
func proofOK(got, want string) bool {
	return len(got) == len(want) && hmac.Equal([]byte(got), []byte(want))
}

// isNonce says whether s is a nonce as randomToken makes them.
func isNonce(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// readHubLine reads one line of at most hubMaxLine bytes, without its
// newline.
func readHubLine(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		frag, err := br.ReadSlice('\n')
		if b.Len()+len(frag) > hubMaxLine {
			return "", fmt.Errorf("a line longer than %d bytes", hubMaxLine)
		}
		b.Write(frag)
		switch {
		case err == nil:
			return strings.TrimSuffix(b.String(), "\n"), nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return "", err
		}
	}
}

// errNotAgent is the error of a socket that did not prove it is the agent.
var errNotAgent = errors.New("it did not prove it is the agent (the agent is gone, and something else listens there?)")

// proveToHub is the sender's side of the handshake on a fresh connection
// to an agent hub's socket: verb is JOIN2 (with key the job's token) or
// NEW2 (with key the linger token). It returns once the agent proved
// itself and the sender's proof is sent; on any error, nothing else was
// sent.
func proveToHub(rw io.Writer, br *bufio.Reader, verb, key string) error {
	id, head := "", verb
	if verb == "JOIN2" {
		id = jobID(key)
		head += " " + id
	}
	nonceS := randomToken()
	if _, err := fmt.Fprintf(rw, "%s %s\n", head, nonceS); err != nil {
		return err
	}
	line, err := readHubLine(br)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotAgent, err)
	}
	if why, ok := strings.CutPrefix(line, lingerRefused); ok {
		return fmt.Errorf("refused: %q", why)
	}
	f := strings.Fields(strings.TrimPrefix(line, hubProofLine))
	if !strings.HasPrefix(line, hubProofLine) || len(f) != 2 || !isNonce(f[0]) ||
		!proofOK(f[1], hubProof(key, "agent", verb, id, nonceS, f[0])) {
		return errNotAgent
	}
	_, err = fmt.Fprintf(rw, "%s%s\n", hubProofLine, hubProof(key, "sender", verb, id, nonceS, f[0]))
	return err
}

// proveFromHub is the listening side of the handshake (see proveToHub) on
// a fresh connection c read through br: key gives the key for the verb
// (JOIN2, with the job's id, or NEW2), or why there is none. It returns
// once the connection proved it holds the key, with the verb and the key;
// if it did not, c has been answered with a refusal and closed (ok
// false).
func proveFromHub(c io.WriteCloser, br *bufio.Reader, key func(verb, id string) (k, why string)) (verb, k string, ok bool) {
	fail := func(why string) (string, string, bool) {
		fmt.Fprintf(c, "%s%s\n", lingerRefused, why)
		c.Close()
		return "", "", false
	}
	line, err := readHubLine(br)
	if err != nil {
		c.Close()
		return "", "", false
	}
	f := strings.Fields(line)
	var id, nonceS string
	switch {
	case len(f) == 3 && f[0] == "JOIN2":
		verb, id, nonceS = f[0], f[1], f[2]
	case len(f) == 2 && f[0] == "NEW2":
		verb, nonceS = f[0], f[1]
	default:
		return fail("bad request (a sender of another version?)")
	}
	if !isNonce(nonceS) {
		return fail("bad nonce")
	}
	k, why := key(verb, id)
	if why != "" {
		return fail(why)
	}
	nonceA := randomToken()
	if _, err := fmt.Fprintf(c, "%s%s %s\n", hubProofLine, nonceA, hubProof(k, "agent", verb, id, nonceS, nonceA)); err != nil {
		c.Close()
		return "", "", false
	}
	line, err = readHubLine(br)
	got, _ := strings.CutPrefix(line, hubProofLine)
	if err != nil || !proofOK(got, hubProof(k, "sender", verb, id, nonceS, nonceA)) {
		return fail("bad proof")
	}
	return verb, k, true
}

// bufferedConn reads through the bufio.Reader the handshake was read
// with, and writes and closes the connection.
type bufferedConn struct {
	*bufio.Reader
	io.WriteCloser
}
