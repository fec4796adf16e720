package local_test

import (
	"testing"

	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/transport/local"
	"github.com/bulkmove/bulkmove/transport/transporttest"
)

// TestConformance runs the transport suite against streams to a receiver
// in this process.
func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, env transporttest.Env) transporttest.Setup {
		tr, err := local.New(env.Dst, extract.FromWire(&env.Dialer.Options), env.Dialer.Src)
		if err != nil {
			t.Fatal(err)
		}
		return transporttest.Setup{Transport: tr}
	})
}
