package engine

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine/throttle"
)

// TestR2RSteerBwLimit: box1's sender takes the control host's requests
// to its bandwidth limit ("bwlimit RATE" from its /bwlimit, "halve" and
// "double" from its SIGUSR1 and SIGUSR2), before a path as after it, in
// order, and never for a path; a bad rate is dropped, and past the queue
// the oldest request gives way.
func TestR2RSteerBwLimit(t *testing.T) {
	pr, pw := io.Pipe()
	s := R2RSender{Stdin: pr, Stdout: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain, chosen, limit := make(chan struct{}), make(chan r2rChosen, 1), make(chan throttle.Request, r2rAsksQueue)
	done := make(chan struct{})
	go func() { s.steer(ctx, cancel, drain, chosen, limit); close(done) }()
	taken := func() (got []string) {
		for {
			select {
			case r := <-limit:
				got = append(got, fmt.Sprintf("%d/%d/%s", r.Op, r.Rate, r.Why))
			default:
				return got
			}
		}
	}

	io.WriteString(pw, "bwlimit 1048576\nhalve\n{\"via\":\"none\",\"why\":\"no way here\"}\n")
	if c := <-chosen; c.err == nil || c.err.Error() != "no way here" {
		t.Fatalf("the path chosen: %+v, want the control host's none (a limit's line taken for a path?)", c)
	}
	want := []string{
		fmt.Sprintf("%d/1048576/PUT /bwlimit on the control host", throttle.Set),
		fmt.Sprintf("%d/0/SIGUSR1 on the control host", throttle.Halve),
	}
	if got := taken(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests %q, want %q", got, want)
	}
	io.WriteString(pw, "bwlimit fast\nbwlimit -1\ndouble\nbwlimit 0\n")
	for i := range r2rAsksQueue - 1 { // with double and bwlimit 0, one more than wait: double gives way
		fmt.Fprintf(pw, "bwlimit %d\n", 1000+i)
	}
	pw.Close()
	<-done // the end of stdin ends steer
	got := taken()
	if len(got) != r2rAsksQueue || got[0] != fmt.Sprintf("%d/0/PUT /bwlimit on the control host", throttle.Set) ||
		got[len(got)-1] != fmt.Sprintf("%d/%d/PUT /bwlimit on the control host", throttle.Set, 1000+r2rAsksQueue-2) {
		t.Errorf("after bad rates, double, bwlimit 0 and %d more: %q; want the bad ones dropped, the oldest (double) given way, the rest in order", r2rAsksQueue-1, got)
	}
}
