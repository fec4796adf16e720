package dataplane

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Greeting is what a sender says first on each connection to `bulkmove
// serve`: the shared token (empty with mutual TLS), the job it belongs to
// (a random id: the streams of one job share a receiver), the stream's
// index, and where to write: "ROOT" or "ROOT/PATH", ROOT being one of the
// server's named roots.
type Greeting struct {
	Token string
	Job   string
	Index int
	Dest  string
}

// WriteGreeting sends g on c.
func WriteGreeting(c net.Conn, g Greeting) error {
	tok := g.Token
	if tok == "" {
		tok = "-"
	}
	_, err := fmt.Fprintf(c, "BULKMOVE-SERVE %s %s %d %s\n", tok, g.Job, g.Index, strconv.Quote(g.Dest))
	return err
}

// maxGreeting bounds a greeting line, newline included.
const maxGreeting = 8 << 10

// ReadGreeting reads a greeting, without reading past it: at most 8 KiB,
// counted as it arrives (an unauthenticated peer must not make the server
// hold more).
func ReadGreeting(c net.Conn) (Greeting, error) {
	line, err := readLine(c, maxGreeting)
	if err != nil {
		return Greeting{}, err
	}
	// A bad greeting is described without its token, nor anything that
	// could be one (what a stranger or another version sent): the
	// message goes to the server's log and back to the sender.
	f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 5)
	if f[0] != "BULKMOVE-SERVE" {
		return Greeting{}, fmt.Errorf("not a bulkmove sender (no BULKMOVE-SERVE greeting; %d bytes)", len(line))
	}
	if len(f) != 5 {
		return Greeting{}, fmt.Errorf("bad greeting: %d fields, want 5", len(f))
	}
	idx, err := strconv.Atoi(f[3])
	dest, qerr := strconv.Unquote(f[4])
	if err != nil || idx < 0 || qerr != nil || f[2] == "" {
		return Greeting{}, fmt.Errorf("bad greeting: job %q, stream %q, destination %q", truncate(f[2]), truncate(f[3]), truncate(f[4]))
	}
	g := Greeting{Token: f[1], Job: f[2], Index: idx, Dest: dest}
	if g.Token == "-" {
		g.Token = ""
	}
	return g, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// TokenOK compares a presented token with the expected one in constant
// time; an empty expected token accepts nothing.
func TokenOK(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// ClientConfig builds the sender's TLS settings for `bulkmove serve`:
// verify the server with the CA in caFile (or the system's), or pin the
// SHA-256 fingerprint of its certificate; present certFile/keyFile for
// mutual TLS.
func ClientConfig(serverName, caFile, fingerprint, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if fingerprint != "" {
		want, err := hex.DecodeString(strings.ReplaceAll(fingerprint, ":", ""))
		if err != nil || len(want) != sha256.Size {
			return nil, fmt.Errorf("--fingerprint %q: want the 64 hex digits of a SHA-256", fingerprint)
		}
		cfg.InsecureSkipVerify = true // pinned instead
		cfg.VerifyConnection = pinned(want, "not the server --fingerprint names")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// ServerConfig builds `bulkmove serve`'s TLS settings: its certificate
// (certFile/keyFile, or a throwaway one whose fingerprint it returns) and,
// with clientCA, mutual TLS.
func ServerConfig(certFile, keyFile, clientCA string) (*tls.Config, string, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	var fp string
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, "", err
		}
		cfg.Certificates = []tls.Certificate{cert}
		sum := sha256.Sum256(cert.Certificate[0])
		fp = hex.EncodeToString(sum[:])
	} else {
		cert, sum, err := selfSigned()
		if err != nil {
			return nil, "", err
		}
		cfg.Certificates = []tls.Certificate{cert}
		fp = sum
	}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, "", err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("%s: no PEM certificate", clientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, fp, nil
}

// DialServe opens one stream to `bulkmove serve` at addr.
func DialServe(ctx context.Context, addr string, cfg *tls.Config, g Greeting) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := tlsClient(c, cfg)
	tc.SetDeadline(time.Now().Add(15 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("TLS with %s: %w", addr, err)
	}
	tc.SetDeadline(time.Time{})
	if err := WriteGreeting(tc, g); err != nil {
		tc.Close()
		return nil, err
	}
	return tc, nil
}
