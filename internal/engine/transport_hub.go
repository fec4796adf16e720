package engine

import (
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport/accepted"
)

// hubTransport is send-hub's transport: the streams its puller opened,
// each set up to compress as the puller asked.
func (j *job) hubTransport(p plan) *accepted.Transport {
	d := j.dialerFor(p)
	d.Configure = func(c *send.Client) { c.Compress, c.Share = j.flags.Compress.Config, &j.share }
	return &accepted.Transport{Dialer: d, Streams: j.hub}
}
