package wire

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// A hub, in this file, is a process that serves one job's K streams and
// takes every stream after the first on a Unix socket: the agent that
// receives a push (`bulkmove agent --hub K`), or the send-hub that sends a
// pull. It announces itself with one banner line on the standard output
// of its first stream (the SSH session that started it), or, if it cannot
// serve, with one Refused line in its place. Its socket's path may come to
// name something else than the hub the sender knew (the hub ended and
// another user made the path again), so every connection to it starts
// with a proof, both ways, that the other end holds the key: the job's
// token for a stream joining a running job (HubJoin), a lingering agent's
// token for a new job (HubNew). The connecting side sends no token, no
// request and no data before the hub has proved itself, and the hub serves
// nothing before the connecting side has:
//
//	sender: JOIN2 JOBID NONCE_S      (or NEW2 NONCE_S)
//	hub:    PROOF NONCE_A HMAC(key, "agent" VERB JOBID NONCE_S NONCE_A)
//	sender: PROOF HMAC(key, "sender" VERB JOBID NONCE_S NONCE_A)
//
// then, for JOIN2, the stream's frames; for NEW2, the request (a JSON
// NewJob) on one line, answered by the agent's banner with the new job's
// token and the next linger token (the one just used no longer works), or
// a Refused line. JOBID names the job without giving its token away (see
// JobID); the two nonces make each proof good for one connection only.
// Every line of the handshake is at most HubMaxLine bytes.

// Banners and the handshake's words.
const (
	// AgentBanner starts the agent's banner (see AgentBannerFields):
	// "BULKMOVE-HUB2 SOCKET job=JOBTOKEN [linger=LINGERTOKEN] [OFFER]".
	AgentBanner = "BULKMOVE-HUB2 "
	// SenderBanner starts the banner of a pull's send-hub: "BULKMOVE-HUB
	// SOCKET job=JOBTOKEN". From an agent it means an older agent, which
	// takes a token without proving itself and names its executable for
	// the sender to run: refused.
	SenderBanner = "BULKMOVE-HUB "
	// Refused starts the line a hub prints in place of its banner, or
	// answers a connection with, when it does not serve: the reason
	// follows, for the sender to show.
	Refused = "BULKMOVE-REFUSED "
	// AgentDial is a line on the stdin of an agent with a data plane
	// (remote to remote, the control host's): "BULKMOVE-DIAL HOST OFFER"
	// asks it to open its K streams to the sender listening at HOST (box1)
	// per OFFER, as dataplane.DialSender does, since box1 cannot reach the
	// agent's port. The agent answers on stdout with AgentDialed and how
	// many streams it opened, their first error after it if not all, or
	// Refused and why none opened.
	AgentDial   = "BULKMOVE-DIAL "
	AgentDialed = "BULKMOVE-DIALED "

	HubJoin    = "JOIN2"  // a stream joins a running job
	HubNew     = "NEW2"   // a new job on a lingering agent
	HubProof   = "PROOF " // starts the hub's proof and the sender's
	HubMaxLine = 4096     // bytes in a line of the handshake, either side
)

// NewToken returns a fresh random token (128 bits, in hex): a job's token,
// a linger token, a nonce.
func NewToken() string {
	var b [16]byte
	rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// JobID names a job on a hub's socket: its token's HMAC, which gives
// nothing of the token away.
func JobID(token string) string {
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

// isNonce says whether s is a nonce as NewToken makes them.
func isNonce(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ReadHubLine reads one line of at most HubMaxLine bytes, without its
// newline.
func ReadHubLine(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		frag, err := br.ReadSlice('\n')
		if b.Len()+len(frag) > HubMaxLine {
			return "", fmt.Errorf("a line longer than %d bytes", HubMaxLine)
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

// ErrNotAgent is the error of a socket that did not prove it is the hub.
var ErrNotAgent = errors.New("it did not prove it is the agent (the agent is gone, and something else listens there?)")

// ProveToHub is the connecting side of the handshake on a fresh
// connection to a hub's socket, written to w and read through br: verb is
// HubJoin (with key the job's token) or HubNew (with key the linger
// token). It returns once the hub proved itself and this side's proof is
// sent; on any error, nothing else was sent.
func ProveToHub(w io.Writer, br *bufio.Reader, verb, key string) error {
	id, head := "", verb
	if verb == HubJoin {
		id = JobID(key)
		head += " " + id
	}
	nonceS := NewToken()
	if _, err := fmt.Fprintf(w, "%s %s\n", head, nonceS); err != nil {
		return err
	}
	line, err := ReadHubLine(br)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotAgent, err)
	}
	if why, ok := strings.CutPrefix(line, Refused); ok {
		return fmt.Errorf("refused: %q", why)
	}
	f := strings.Fields(strings.TrimPrefix(line, HubProof))
	if !strings.HasPrefix(line, HubProof) || len(f) != 2 || !isNonce(f[0]) ||
		!proofOK(f[1], hubProof(key, "agent", verb, id, nonceS, f[0])) {
		return ErrNotAgent
	}
	_, err = fmt.Fprintf(w, "%s%s\n", HubProof, hubProof(key, "sender", verb, id, nonceS, f[0]))
	return err
}

// AcceptHub is the hub's side of the handshake (see ProveToHub) on a
// fresh connection c read through br: key gives the key for the verb
// (HubJoin, with the job's id, or HubNew), or why there is none. It
// returns once the connection proved it holds the key, with the verb and
// the key; if it did not, c has been answered with a refusal and closed
// (ok false).
func AcceptHub(c io.WriteCloser, br *bufio.Reader, key func(verb, id string) (k, why string)) (verb, k string, ok bool) {
	fail := func(why string) (string, string, bool) {
		RefuseHub(c, why)
		return "", "", false
	}
	line, err := ReadHubLine(br)
	if err != nil {
		c.Close()
		return "", "", false
	}
	f := strings.Fields(line)
	var id, nonceS string
	switch {
	case len(f) == 3 && f[0] == HubJoin:
		verb, id, nonceS = f[0], f[1], f[2]
	case len(f) == 2 && f[0] == HubNew:
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
	nonceA := NewToken()
	if _, err := fmt.Fprintf(c, "%s%s %s\n", HubProof, nonceA, hubProof(k, "agent", verb, id, nonceS, nonceA)); err != nil {
		c.Close()
		return "", "", false
	}
	line, err = ReadHubLine(br)
	got, _ := strings.CutPrefix(line, HubProof)
	if err != nil || !proofOK(got, hubProof(k, "sender", verb, id, nonceS, nonceA)) {
		return fail("bad proof")
	}
	return verb, k, true
}

// RefuseHub answers a connection to a hub's socket with the reason it is
// refused, and closes it.
func RefuseHub(c io.WriteCloser, why string) {
	fmt.Fprintf(c, "%s%s\n", Refused, why)
	c.Close()
}

// AgentBannerFields are the fields of an agent's banner.
type AgentBannerFields struct {
	Sock   string // the agent's socket, where the job's other streams join
	Job    string // the job's token, which every joining stream proves it holds
	Linger string // optional: the token of the next new job on a lingering agent
	Offer  string // optional: the data plane's offer ("data=MODE:PORT:CERT-SHA256:TOKEN")
}

// String is the banner line, without its newline. It names no
// executable: what a sender runs on the agent's host is its own choice,
// never something a banner says.
func (b AgentBannerFields) String() string {
	s := fmt.Sprintf("%s%s job=%s", AgentBanner, b.Sock, b.Job)
	if b.Linger != "" {
		s += " linger=" + b.Linger
	}
	if b.Offer != "" {
		s += " " + b.Offer
	}
	return s
}

// ParseAgentBanner reads the fields of an agent's banner line (starting
// AgentBanner). A banner without a job's token is refused, quoted with
// its tokens left out (see RedactBanner).
func ParseAgentBanner(line string) (AgentBannerFields, error) {
	var b AgentBannerFields
	fields := strings.Fields(strings.TrimPrefix(line, AgentBanner))
	if len(fields) >= 1 {
		b.Sock = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "job":
				b.Job = v
			case "linger":
				b.Linger = v
			case "data":
				b.Offer = f
			}
		}
	}
	if b.Job == "" {
		return b, fmt.Errorf("bad agent banner %q (an agent older than this bulkmove?)", RedactBanner(line))
	}
	return b, nil
}

// RedactBanner is a banner line fit for a message: the value of every
// key=value field (the job's and the linger token, the data plane's offer
// with its token) is left out.
func RedactBanner(line string) string {
	fields := strings.Fields(line)
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok {
			fields[i] = k + "=..."
		}
	}
	return strings.Join(fields, " ")
}

// NewJob is the request of a later run for a job of its own on a
// lingering agent (after HubNew's proofs).
type NewJob struct {
	Root   string        `json:"root"`
	Linger time.Duration `json:"linger"`            // from now on; 0 ends the agent with this job
	Nice   string        `json:"nice"`              // the --nice/--io-nice the agent would be started with
	SrcIDs string        `json:"src_ids,omitempty"` // as the agent's --src-ids
	// Allow is the job's receive policy, as the agent's --allow-* flags
	// give it to a new agent: the run that asks is the agent's own user,
	// as trusted as the command line (the token proves it).
	Allow Allow `json:"allow"`
}

// Allow is what a receiver lets its sender keep beyond data, names, modes
// and times: the agent's --allow-* flags, and a new job's policy.
type Allow struct {
	Owner  bool `json:"owner,omitempty"`
	Setid  bool `json:"setid,omitempty"`
	Xattrs bool `json:"xattrs,omitempty"`
	ACLs   bool `json:"acls,omitempty"`
	// Devices: character and block devices may be made (-D), where the
	// receiver may (root, CAP_MKNOD). FIFOs and sockets need no leave.
	Devices bool `json:"devices,omitempty"`
}
