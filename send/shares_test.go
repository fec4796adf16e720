package send

import (
	"math"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/wire"
)

// TestReceiverSharesSlowPeer: before the receiver's first measure, one
// that said its filesystem is slow counts as busy writing (so that writes
// the first batch waited for do not pass for a slow link); once measured,
// the measure counts.
func TestReceiverSharesSlowPeer(t *testing.T) {
	for _, slow := range []bool{false, true} {
		c := &Client{Peer: wire.Handshake{Slow: slow}}
		now := time.Now()
		w, _ := c.receiverShares(now, 0, 0)
		if want := map[bool]float64{false: 0, true: 1}[slow]; w != want {
			t.Errorf("slow %v: first share writing %v, want %v", slow, w, want)
		}
		w, cpu := c.receiverShares(now.Add(time.Second), int64(300*time.Millisecond), int64(500*time.Millisecond))
		if math.Abs(w-0.3) > 1e-9 || math.Abs(cpu-0.5) > 1e-9 {
			t.Errorf("slow %v: measured shares %v, %v, want 0.3, 0.5", slow, w, cpu)
		}
	}
}
