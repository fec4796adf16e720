package engine

import "testing"

// TestSenderConfigBwLimit: --bwlimit, a rate or a timetable, reaches the
// sender that takes the job's options in --config (a remote-to-remote
// move's box1, which applies it) as it was given; none stays none.
func TestSenderConfigBwLimit(t *testing.T) {
	for _, limit := range []string{"", "2M", "08:00,512k 18:00,off"} {
		c := DefaultConfig()
		if limit != "" {
			if err := c.Gentle.BwLimit.Set(limit); err != nil {
				t.Fatal(err)
			}
		}
		enc, err := EncodeSenderConfig(c.forR2R())
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSenderConfig(enc)
		if err != nil {
			t.Fatal(err)
		}
		if s := got.Gentle.BwLimit.String(); s != limit {
			t.Errorf("--bwlimit %q reaches the sender as %q", limit, s)
		}
	}
}
