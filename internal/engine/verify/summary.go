package verify

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/sharder"
)

// shardReport is what one verify --json report says.
type shardReport struct {
	file  string
	end   *event.VerifyEvent
	diffs []event.ProblemEvent
}

// Summary merges the reports of verify --shard i/N --json, files (one a
// shard), into one: every difference on stdout, sorted by path, then the
// totals; and checks that they cover the tree. Differ: a difference;
// Failed: a report missing, repeated, incomplete or failed.
func Summary(files []string, stdout, stderr io.Writer) Status {
	var reps []shardReport
	for _, name := range files {
		r, err := readVerifyReport(name)
		if err != nil {
			termsafe.Errorf(stderr, "verify-summary: %v", err)
			return Failed
		}
		reps = append(reps, r)
	}
	var problems []string
	var total event.VerifyEvent
	var diffs []event.ProblemEvent
	byShard := map[sharder.Shard]string{}
	count := 0
	for _, r := range reps {
		if r.end == nil {
			problems = append(problems, fmt.Sprintf("%s: incomplete (no summary event: did verify finish?)", r.file))
			continue
		}
		e := r.end
		if e.ExitCode != 0 && e.ExitCode != 2 || e.Error != "" {
			problems = append(problems, fmt.Sprintf("%s: verify failed (exit %d): %s", r.file, e.ExitCode, e.Error))
		}
		sh := sharder.Shard{Count: 1}
		if e.Shard != "" {
			var err error
			if sh, err = sharder.ParseShard(e.Shard); err != nil {
				problems = append(problems, fmt.Sprintf("%s: shard %q: %v", r.file, e.Shard, err))
				continue
			}
		}
		switch {
		case count == 0:
			count = sh.Count
			total.Src, total.Dst = e.Src, e.Dst
		case sh.Count != count:
			problems = append(problems, fmt.Sprintf("%s: shard %s, but another report is of %d shards", r.file, sh, count))
			continue
		}
		if e.Src != total.Src || e.Dst != total.Dst {
			problems = append(problems, fmt.Sprintf("%s: compares %s with %s, another report %s with %s", r.file, e.Src, e.Dst, total.Src, total.Dst))
		}
		if other, dup := byShard[sh]; dup {
			problems = append(problems, fmt.Sprintf("%s: shard %s again (also in %s)", r.file, sh, other))
			continue
		}
		byShard[sh] = r.file
		total.Compared += e.Compared
		total.Differ += e.Differ
		total.Missing += e.Missing
		total.Extra += e.Extra
		total.Errors += e.Errors
		diffs = append(diffs, r.diffs...)
	}
	var missing []string
	for i := range count {
		sh := sharder.Shard{Index: i, Count: count}
		if count == 1 {
			sh.Index = 0
		}
		if _, ok := byShard[sh]; !ok {
			missing = append(missing, sh.String())
		}
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("no report of shard %s", strings.Join(missing, ", ")))
	}
	slices.SortStableFunc(diffs, func(a, b event.ProblemEvent) int { return cmp.Compare(a.Path, b.Path) })
	for _, d := range diffs {
		switch d.Message {
		case "missing", "extra":
			termsafe.Printf(stdout, "%s %s\n", d.Message, d.Path)
		default:
			termsafe.Printf(stdout, "differ %s: %s\n", d.Path, d.Message)
		}
	}
	for _, p := range problems {
		termsafe.Errorf(stderr, "verify-summary: %s", p)
	}
	fmt.Fprintf(stdout, "verify-summary: %d of %d shards, %d entries compared: %d differ, %d missing, %d extra, %d unreadable\n",
		len(byShard), max(count, 1), total.Compared, total.Differ, total.Missing, total.Extra, total.Errors)
	switch {
	case len(problems) > 0:
		return Failed
	case total.Differ+total.Missing+total.Extra+total.Errors > 0:
		return Differ
	}
	return Same
}

// readVerifyReport reads the events of one verify --json run.
func readVerifyReport(name string) (shardReport, error) {
	r := shardReport{file: name}
	f, err := os.Open(name)
	if err != nil {
		return r, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var head event.Head
		if err := json.Unmarshal(line, &head); err != nil {
			return r, fmt.Errorf("%s:%d: not a verify --json report: %v", name, n, err)
		}
		switch head.Type {
		case "difference":
			var d event.ProblemEvent
			if err := json.Unmarshal(line, &d); err != nil {
				return r, fmt.Errorf("%s:%d: %v", name, n, err)
			}
			d.Path = d.ExactPath()
			r.diffs = append(r.diffs, d)
		case "verify":
			var e event.VerifyEvent
			if err := json.Unmarshal(line, &e); err != nil {
				return r, fmt.Errorf("%s:%d: %v", name, n, err)
			}
			r.end = &e
		}
	}
	return r, sc.Err()
}
