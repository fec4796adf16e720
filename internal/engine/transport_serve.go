package engine

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/bulkmove/bulkmove/transport/serve"
	"github.com/bulkmove/bulkmove/transport/sshx"
)

// serveScheme starts a DEST that is a `bulkmove serve` daemon.
const serveScheme = "bulkmove://"

// ServeClient are the sender's flags for bulkmove:// destinations.
type ServeClient struct {
	TokenFile, Fingerprint, CA, Cert, Key string
}

// parseServe reads bulkmove://HOST:PORT/NAME/PATH; the target's Path is
// NAME/PATH, as the server resolves it.
func (j *job) parseServe(s string) (sshx.Target, bool, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Port() == "" || strings.Trim(u.Path, "/") == "" {
		return sshx.Target{}, true, fmt.Errorf("%q: want bulkmove://HOST:PORT/ROOT[/PATH]", s)
	}
	j.serveAddr = u.Host
	return sshx.Target{Host: u.Hostname(), Path: strings.Trim(u.Path, "/")}, true, nil
}

// serveTransport is the transport to the serve daemon DEST names.
func (j *job) serveTransport(p plan) (*serve.Transport, error) {
	f := j.flags.Serve
	return serve.New(j.serveAddr, p.dstRoot, serve.Credentials{TokenFile: f.TokenFile, Fingerprint: f.Fingerprint, CA: f.CA, Cert: f.Cert, Key: f.Key}, j.dialerFor(p))
}
