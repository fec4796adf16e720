package metrics

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"time"
)

// ListenAddr is the address Serve listens on for addr: one without a host
// (":9100", ":0") is loopback's, 127.0.0.1:PORT, so that metrics and the
// control endpoint beside them are not offered to the network unless
// someone names a host (0.0.0.0:9100, [::]:9100, a name or an address);
// loopback reports whether the host was filled in so.
func ListenAddr(addr string) (listen string, loopback bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr, false // as given; net.Listen says what is wrong with it
	}
	return net.JoinHostPort("127.0.0.1", port), true
}

// wrongTokenDelay is how long a request with a wrong or missing token
// waits before its 401; failures wait one after another, so however many
// connections guess at once, a listener answers at most one guess a delay.
var wrongTokenDelay = time.Second

// GuardWrites lets GET and HEAD through to h, and every other method
// (those that change something) only with "Authorization: Bearer TOKEN".
// Without a token (token ""), they are refused with 403 and the message
// off, which says how to turn them on. A wrong or missing token is
// answered 401 after wrongTokenDelay. The token is compared in constant
// time (its SHA-256, so that its length does not show either).
func GuardWrites(h http.Handler, token, off string) http.Handler {
	return &guard{h: h, want: sha256.Sum256([]byte(token)), on: token != "", off: off, slow: make(chan struct{}, 1)}
}

type guard struct {
	h    http.Handler
	want [sha256.Size]byte
	on   bool
	off  string
	slow chan struct{} // held by the failure being delayed
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		g.h.ServeHTTP(w, r)
		return
	}
	if !g.on {
		http.Error(w, g.off, http.StatusForbidden)
		return
	}
	if got, ok := bearer(r); ok {
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], g.want[:]) == 1 {
			g.h.ServeHTTP(w, r)
			return
		}
	}
	if !g.delay(r.Context()) {
		return // the client left
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="bulkmove control"`)
	http.Error(w, "wrong or missing token: send Authorization: Bearer <token>", http.StatusUnauthorized)
}

// delay waits its turn and wrongTokenDelay; false if ctx ended first.
func (g *guard) delay(ctx context.Context) bool {
	select {
	case g.slow <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-g.slow }()
	t := time.NewTimer(wrongTokenDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// bearer is the token of r's "Authorization: Bearer TOKEN" (the scheme's
// case does not matter, RFC 7235).
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}
