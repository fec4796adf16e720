package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine/event"
)

// report writes, as verify --json would through an event.Writer, a
// shard's report: its differences, then its end event (unless end is
// nil).
func report(t *testing.T, dir, name string, diffs [][2]string, end *event.VerifyEvent) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := event.NewWriter(f)
	for _, d := range diffs {
		w.Problem("difference", d[0], d[1])
	}
	if end != nil {
		w.Emit("verify", &end.Head, end)
	}
	return p
}

// TestSummary: the reports the event writer writes merge into one, the
// differences sorted by path (a name that is not UTF-8 comes back whole),
// and a shard missing or cut short fails the summary.
func TestSummary(t *testing.T) {
	dir := t.TempDir()
	shard := func(s string, compared, extra int64, code int) *event.VerifyEvent {
		return &event.VerifyEvent{Src: "src", Dst: "dst", Shard: s, Content: true, Compared: compared, Extra: extra, ExitCode: code}
	}
	r0 := report(t, dir, "r0.json", [][2]string{{"z\xffz", "extra"}}, shard("0/2", 10, 1, 2))
	r1 := report(t, dir, "r1.json", [][2]string{{"a", "extra"}}, shard("1/2", 5, 1, 2))
	cut := report(t, dir, "cut.json", nil, nil)

	var out, errs strings.Builder
	if st := Summary([]string{r0, r1}, &out, &errs); st != Differ {
		t.Fatalf("status %d, want Differ; stderr: %s", st, errs.String())
	}
	want := "extra a\nextra z\\xffz\nverify-summary: 2 of 2 shards, 15 entries compared: 0 differ, 0 missing, 2 extra, 0 unreadable\n"
	if out.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), want)
	}

	for _, files := range [][]string{{r0}, {r0, cut}, {r0, r1, r1}} {
		out.Reset()
		errs.Reset()
		if st := Summary(files, &out, &errs); st != Failed {
			t.Errorf("%d reports: status %d, want Failed; stderr: %s", len(files), st, errs.String())
		}
	}
}
