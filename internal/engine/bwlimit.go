package engine

import (
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
)

// limit sets up the job's limits: --max-read-rate on the source, and the
// bandwidth limit of the streams (j.bw, also in the metrics), which
// observe starts. It returns the function that ends the bandwidth control.
func (j *job) limit(p *plan) func() {
	p.src.Limit = ratelimit.New(int64(j.flags.Gentle.MaxReadRate))
	j.bw = throttle.New(j.flags.Gentle.BwLimit, j.m.SentBytes, j.asks)
	j.m.Limit = j.bw.Bucket()
	return j.bw.Stop
}
