package engine

import (
	"context"
	"fmt"

	"github.com/bulkmove/bulkmove/stream"
)

func (j *job) connectHub(ctx context.Context, p plan) ([]stream.Conn, func(), error) {
	ro := j.receiveOptions()
	var conns []stream.Conn
	for i, d := range j.hub {
		c, err := stream.Dial(ctx, fmt.Sprintf("stream %d", i), d.r, d.w, d.c, Version, ro, p.src)
		if err != nil {
			for _, c := range conns {
				c.(*stream.Client).Abort()
			}
			return nil, nil, err
		}
		c.Compress, c.Share = j.flags.compress.Compression, &j.share
		conns = append(conns, c)
	}
	return conns, func() {}, nil
}
