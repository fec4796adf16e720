package engine

import (
	"context"
	"io"
	"testing"
)

// TestR2RSteerBwLimit: box1's sender takes the control host's "bwlimit
// RATE" lines for its limit, before a path as after it, and never for a
// path; of two it has not yet passed on the last wins, and a bad one is
// dropped.
func TestR2RSteerBwLimit(t *testing.T) {
	pr, pw := io.Pipe()
	s := R2RSender{Stdin: pr, Stdout: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain, chosen, limit := make(chan struct{}), make(chan r2rChosen, 1), make(chan int64, 1)
	done := make(chan struct{})
	go func() { s.steer(ctx, cancel, drain, chosen, limit); close(done) }()

	io.WriteString(pw, "bwlimit 1048576\nbwlimit 2097152\n{\"via\":\"none\",\"why\":\"no way here\"}\n")
	if c := <-chosen; c.err == nil || c.err.Error() != "no way here" {
		t.Fatalf("the path chosen: %+v, want the control host's none (a bwlimit line taken for a path?)", c)
	}
	if got := <-limit; got != 2<<20 {
		t.Errorf("limit %d, want the last asked, %d", got, 2<<20)
	}
	io.WriteString(pw, "bwlimit fast\nbwlimit -1\nbwlimit 0\n")
	pw.Close()
	<-done // the end of stdin ends steer
	select {
	case got := <-limit:
		if got != 0 {
			t.Errorf("limit %d after a bad line and \"bwlimit 0\", want 0 (none)", got)
		}
	default:
		t.Error("\"bwlimit 0\" after the path was not passed on")
	}
	select {
	case got := <-limit:
		t.Errorf("a bad line passed on %d", got)
	default:
	}
}
