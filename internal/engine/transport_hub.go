package engine

import (
	"context"
	"fmt"

	"github.com/bulkmove/bulkmove/send"
)

func (j *job) connectHub(ctx context.Context, p plan) ([]send.Conn, func(), error) {
	ro := j.receiveOptions()
	var conns []send.Conn
	for i, d := range j.hub {
		c, err := send.Dial(ctx, fmt.Sprintf("stream %d", i), d.r, d.w, d.c, Version, ro, p.src)
		if err != nil {
			for _, c := range conns {
				c.(*send.Client).Abort()
			}
			return nil, nil, err
		}
		c.Compress, c.Share = j.flags.Compress.Config, &j.share
		conns = append(conns, c)
	}
	return conns, func() {}, nil
}
