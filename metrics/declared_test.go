package metrics

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/bulkmove/bulkmove/wire"
)

type fixedTotals wire.Totals

func (f fixedTotals) Totals() wire.Totals { return wire.Totals(f) }

// job returns the collectors of one job, sending and receiving side, with
// every counter and label value in use, as one process holding both ends
// would register them.
func job() map[string]prometheus.Collector {
	j := NewJob(2)
	j.AutoJ.InUse.Store(2)
	j.AutoJ.Target.Store(2)
	j.AutoJ.Decided("add")
	for _, s := range j.Streams {
		s.BytesSent.Add(1)
		s.RecvBytes.Add(1)
		s.RecvCPUNanos.Store(1)
		s.Active.Store(true)
	}
	j.SetPrevious(&Outcome{LastSuccess: time.Unix(1, 0)})
	var r Receiver
	r.Set(fixedTotals{Files: 1, Bytes: 1, Skipped: 1, Errors: 1, WriteNanos: 1, FsyncNanos: 1})
	return map[string]prometheus.Collector{"Job": j, "Receiver": &r}
}

// TestEachMetricDeclaredOnce: every bulkmove_* metric of a job is declared
// by one collector and with one label set. Each collector is gathered on
// its own by a pedantic registry (which checks that what it collects
// matches what it describes); a name two collectors export, or a family
// whose series differ in their label names, fails. Then all of them,
// with the build information and the Go and process collectors, register
// and gather in one registry, which client_golang refuses for a name
// described twice.
func TestEachMetricDeclaredOnce(t *testing.T) {
	owner := map[string]string{} // metric name -> collector
	for _, who := range []string{"Job", "Receiver"} {
		c := job()[who]
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(c); err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		for _, mf := range mfs {
			name := mf.GetName()
			if !strings.HasPrefix(name, "bulkmove_") {
				t.Errorf("%s exports %s: every metric of bulkmove is named bulkmove_*", who, name)
			}
			if o, dup := owner[name]; dup {
				t.Errorf("%s is declared by both %s and %s", name, o, who)
			}
			owner[name] = who
			var first []string
			for i, m := range mf.GetMetric() {
				labels := labelNames(m)
				if i == 0 {
					first = labels
				} else if !slices.Equal(labels, first) {
					t.Errorf("%s (%s) has series labelled %v and %v", name, who, first, labels)
				}
			}
		}
	}
	if len(owner) == 0 {
		t.Fatal("no metrics gathered")
	}

	var all []prometheus.Collector
	for _, c := range job() {
		all = append(all, c)
	}
	var reg *prometheus.Registry
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("the collectors of one job do not register together: %v", p)
			}
		}()
		reg = newRegistry("test", nil, true, all...)
	}()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("the collectors of one job do not gather together: %v", err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if seen[mf.GetName()] {
			t.Errorf("%s gathered twice", mf.GetName())
		}
		seen[mf.GetName()] = true
	}
	for name := range owner {
		if !seen[name] {
			t.Errorf("%s missing from the registry of the whole job", name)
		}
	}
}

func labelNames(m *dto.Metric) []string {
	var names []string
	for _, l := range m.GetLabel() {
		names = append(names, l.GetName())
	}
	slices.Sort(names)
	return names
}

// TestOnlyMetricsDeclaresMetrics: no package but this one imports the
// Prometheus client, so that every metric is declared here, once, and the
// ends report into this package rather than declaring their own.
func TestOnlyMetricsDeclaresMetrics(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	here, _ := filepath.Abs(".")
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == here || path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/prometheus/") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s: metrics are declared in package metrics only", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDocumentedMetricsExist: every bulkmove_* name the documentation, the
// dashboard and the alert rules mention is a metric this package declares
// (a name ending in "_", as in bulkmove_destination_*, is a prefix of
// some). The deploy tests check the dashboard's and the rules' queries,
// labels included, against a real Prometheus.
func TestDocumentedMetricsExist(t *testing.T) {
	declared := map[string]bool{"bulkmove_build_info": true}
	for _, c := range job() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			declared[mf.GetName()] = true
		}
	}
	name := regexp.MustCompile(`\bbulkmove_[a-z0-9_]+`)
	var files []string
	for _, pat := range []string{"../README.md", "../docs/*.md", "../deploy/*.md", "../deploy/*/*"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	checked := 0
	for _, f := range files {
		switch filepath.Ext(f) {
		case ".md", ".json", ".yml", ".yaml":
		default:
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			checked++
			if !declared[n] && !(strings.HasSuffix(n, "_") && hasPrefixed(declared, n)) {
				t.Errorf("%s names %s, which no collector declares", f, n)
			}
		}
	}
	if checked == 0 {
		t.Error("no metric names found in the documentation")
	}
}

func hasPrefixed(names map[string]bool, prefix string) bool {
	for n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}
