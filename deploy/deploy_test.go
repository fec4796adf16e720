//go:build linux

// Package deploy_test checks the files operators install from deploy/
// against real tools: promtool validates the rules and the example scrape
// configuration, and a real Prometheus scrapes a real bulkmove transfer
// while every PromQL expression of the Grafana dashboard and of the alert
// rules is evaluated through its HTTP API and must return data.
//
// Without prometheus and promtool on PATH (Debian package "prometheus")
// the tests skip with a message, unless CI is set in the environment: then
// they fail.
package deploy_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

const (
	dashboardFile = "grafana/bulkmove-dashboard.json"
	rulesFile     = "prometheus/rules.yml"
	rulesTestFile = "prometheus/rules_test.yml"
	scrapeFile    = "prometheus/scrape.yml"

	treeFiles = 30000 // files of 1 KiB in the transferred tree
	scrapeJob = "bulkmove"
)

// TestMain removes, when the tests end, the bulkmove testbin.Build makes
// for the transfer Prometheus scrapes.
func TestMain(m *testing.M) { os.Exit(testbin.WithCleanup(m).Run()) }

// tools returns the paths of prometheus and promtool, skipping the test
// when one is missing outside CI.
func tools(t *testing.T) (prometheus, promtool string) {
	t.Helper()
	var missing []string
	find := func(name string) string {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
		}
		return p
	}
	prometheus, promtool = find("prometheus"), find("promtool")
	if len(missing) > 0 {
		msg := fmt.Sprintf("%s not found on PATH (Debian package: prometheus)", strings.Join(missing, " and "))
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; skipping")
	}
	return prometheus, promtool
}

// TestPromtoolCheck: the rules and the example scrape configuration (which
// loads the rules and a file_sd target file) pass promtool.
func TestPromtoolCheck(t *testing.T) {
	_, promtool := tools(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"check", "config", scrapeFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPromtoolTestRules: the unit tests of the alert rules
// (prometheus/rules_test.yml) pass under promtool test rules, and every
// alert of rules.yml is tested there firing at least once.
func TestPromtoolTestRules(t *testing.T) {
	_, promtool := tools(t)
	out, err := exec.Command(promtool, "test", "rules", rulesTestFile).CombinedOutput()
	if err != nil {
		t.Errorf("promtool test rules %s: %v\n%s", rulesTestFile, err, out)
	}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	// An alert tested firing: its name, then exp_alerts with an entry.
	fires := regexp.MustCompile(`alertname: (\w+)\s+exp_alerts:\s+- `)
	tested := map[string]bool{}
	for _, m := range fires.FindAllStringSubmatch(string(tests), -1) {
		tested[m[1]] = true
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 7 {
		t.Errorf("%s has %d alerts, want at least 7", rulesFile, len(alerts))
	}
	for _, m := range alerts {
		if !tested[m[1]] {
			t.Errorf("alert %s: no test in %s that expects it to fire", m[1], rulesTestFile)
		}
	}
}

// TestQueriesReturnData runs a bulkmove transfer (-j 2 --via-agent,
// compressed, slowed by --bwlimit) with --metrics-addr, has a Prometheus
// on loopback scrape it every second (the target comes from a file_sd file
// written once bulkmove prints its address; the server also loads
// rules.yml), waits for two successful scrapes, and then evaluates at one
// instant T, while the transfer runs:
//
//   - every "expr" of the dashboard, with the variables substituted ($job,
//     $instance: the scrape target's labels; $stream: "0";
//     $__rate_interval: 5s): each must return at least one sample that is
//     not NaN (so a ratio that divides by a rate of zero does not count),
//     and every metric it names must be in the scrape;
//   - the metric selector of every label_values() variable query: it must
//     return series carrying the label;
//   - every rule of rules.yml, as Prometheus loaded it (/api/v1/rules). The
//     alerts are meant to be empty while a transfer is healthy, so the whole
//     expression must evaluate without error and return nothing; and it is
//     cut into its measurements (see measurements: the operands of its
//     top-level "or", "and"/"unless" and comparison operators, recursively,
//     with number literals such as thresholds dropped), each of which must
//     return data like a dashboard expression, every metric named in the
//     scrape.
//
// The outcome of the run before (bulkmove_job_last_exit_code, the last
// success) is what a job exports from the textfile that run left: a first,
// small run writes it, and the transfer reads it back.
//
// If some expression has no data at T, T moves on by a second, up to a
// deadline, while the transfer still runs: the first scrapes of a job can
// miss a rate window. At T the verdict must be bwlimit (the limit is what
// holds the transfer back) with no advice to add streams.
//
// Then the limit is lifted through the control endpoint (PUT /bwlimit with
// the --control-token), and the job must finish with exit code 0, no alert
// firing, every rule evaluated by Prometheus in health "ok", and a
// textfile that promtool check metrics accepts, without the Go and process
// families.
func TestQueriesReturnData(t *testing.T) {
	promBin, _ := tools(t)
	if testing.Short() {
		t.Skip("starts Prometheus and a transfer; skipped with -short")
	}
	start := time.Now()
	dash := readDashboard(t)
	tmp := t.TempDir()

	// bulkmove, built from this module.
	bin := testbin.Build(t)
	t.Logf("built bulkmove in %.1fs", time.Since(start).Seconds())

	// The tree, on tmpfs when there is one.
	treeDir := tmp
	if d, err := os.MkdirTemp("/dev/shm", "bulkmove-deploy-"); err == nil {
		treeDir = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	src, dst := filepath.Join(treeDir, "src"), filepath.Join(treeDir, "dst")
	if err := gentree.Small(src, treeFiles, treeFiles/100, 1024); err != nil {
		t.Fatal(err)
	}

	// Prometheus, scraping what the file_sd file names.
	sdDir := filepath.Join(tmp, "sd")
	if err := os.Mkdir(sdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	rulesAbs, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: %s
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, rulesAbs, scrapeJob, filepath.Join(sdDir, "*.json"))
	cfgPath := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("tree of %d files in %s after %.1fs", treeFiles, src, time.Since(start).Seconds())
	prom := startPrometheus(t, promBin, cfgPath, filepath.Join(tmp, "tsdb"))
	t.Logf("Prometheus ready after %.1fs", time.Since(start).Seconds())

	// The run before: it leaves its outcome in the textfile.
	textfile := filepath.Join(tmp, "bulkmove.prom")
	small := filepath.Join(treeDir, "small")
	if err := gentree.Small(small, 10, 1, 1024); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "--metrics-textfile", textfile, small, filepath.Join(treeDir, "small-dst")).CombinedOutput(); err != nil {
		t.Fatalf("the run before: %v\n%s", err, out)
	}
	token := filepath.Join(tmp, "control-token")
	if err := os.WriteFile(token, []byte(randomHex(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The transfer.
	job := startJob(t, bin, src, dst, textfile, token)
	addr := job.waitAddr(t)
	t.Logf("bulkmove exports metrics on %s; Prometheus on %s", addr, prom.base)
	if err := writeAtomic(filepath.Join(sdDir, "bulkmove.json"),
		fmt.Sprintf(`[{"targets": [%q]}]`, addr)); err != nil {
		t.Fatal(err)
	}

	// Two successful scrapes of the transfer.
	upQuery := fmt.Sprintf(`sum_over_time(up{job=%q, instance=%q}[1m])`, scrapeJob, addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := prom.query(upQuery, time.Now())
		if err == nil && res.max() >= 2 {
			break
		}
		if job.exited() {
			t.Fatalf("bulkmove finished before Prometheus scraped it twice:\n%s", job.log())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two successful scrapes of %s after 20 s (last: %v, %v)\ntargets: %s\nprometheus log:\n%s",
				addr, res, err, prom.get("/api/v1/targets"), prom.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("two scrapes after %.1fs", time.Since(start).Seconds())

	// What to evaluate.
	vars := map[string]string{
		"job":             scrapeJob,
		"instance":        strings.ReplaceAll(regexp.QuoteMeta(addr), `\`, `\\`), // as Grafana escapes a regex in a PromQL string
		"stream":          "0",
		"__rate_interval": "5s",
		"__interval":      "1s",
		"__range":         "5s",
	}
	var checks []check
	exprs, varQueries := dashboardQueries(dash)
	if len(exprs) < 20 || len(varQueries) < 3 {
		t.Fatalf("found only %d expressions and %d variable queries in %s", len(exprs), len(varQueries), dashboardFile)
	}
	for _, e := range exprs {
		q, err := substitute(e.expr, vars)
		if err != nil {
			t.Errorf("%s: %v", e.where, err)
			continue
		}
		checks = append(checks, check{where: e.where, query: q, want: hasData, names: metricNames(q)})
	}
	for _, v := range varQueries {
		q, err := substitute(v.expr, vars)
		if err != nil {
			t.Errorf("%s: %v", v.where, err)
			continue
		}
		m := labelValuesRE.FindStringSubmatch(strings.TrimSpace(q))
		if m == nil {
			t.Errorf("%s: %q is not label_values(SELECTOR, LABEL)", v.where, q)
			continue
		}
		checks = append(checks, check{where: v.where, query: m[1], want: hasLabel(m[2])})
	}
	rules := prom.rules(t)
	if len(rules) < 4 {
		t.Fatalf("Prometheus loaded %d rules from %s, want at least 4", len(rules), rulesFile)
	}
	for _, r := range rules {
		if r.Type != "alerting" {
			checks = append(checks, check{where: "recording rule " + r.Name, query: r.Query, want: hasData})
			continue
		}
		checks = append(checks, check{where: "alert " + r.Name, query: r.Query, want: isEmpty, names: metricNames(r.Query)})
		parts := measurements(r.Query)
		if len(parts) == 0 {
			t.Errorf("alert %s: no measurement found in %q", r.Name, r.Query)
		}
		t.Logf("alert %s: %d measurements:\n\t%s", r.Name, len(parts), strings.Join(parts, "\n\t"))
		for _, p := range parts {
			checks = append(checks, check{where: "alert " + r.Name + ", measurement", query: p, want: hasData})
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Evaluate them all at one instant while the transfer runs.
	var failures []string
	var at time.Time
	deadline = time.Now().Add(10 * time.Second)
	for attempt := 1; ; attempt++ {
		if job.exited() {
			t.Fatalf("bulkmove finished before there was an instant at which every query passed; at the last one tried:\n%s\njob log:\n%s",
				strings.Join(failures, "\n"), job.log())
		}
		at = time.Now()
		failures = failures[:0]
		scraped, err := prom.names(addr, at)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			if missing := without(c.names, scraped); len(missing) > 0 {
				failures = append(failures, fmt.Sprintf("%s:\n\t%s\n\tnames %v, not in the scrape of bulkmove", c.where, c.query, missing))
			}
			res, err := prom.query(c.query, at)
			if err == nil {
				err = c.want(res)
			}
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s:\n\t%s\n\t%v", c.where, c.query, err))
			}
		}
		if len(failures) == 0 {
			t.Logf("all %d queries (%d dashboard expressions, %d variable queries, %d rules) pass at T = %s, attempt %d, %.1fs into the test",
				len(checks), len(exprs), len(varQueries), len(rules), at.Format(time.RFC3339Nano), attempt, time.Since(start).Seconds())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d attempts, %d of %d queries fail at T = %s:\n%s", attempt, len(failures), len(checks),
				at.Format(time.RFC3339Nano), strings.Join(failures, "\n"))
		}
		time.Sleep(time.Second)
	}
	if res, err := prom.query(fmt.Sprintf(`bulkmove_job_walk_done{instance=%q} == 0 or bulkmove_job_done_bytes_total{instance=%q} < bulkmove_job_planned_bytes{instance=%q}`, addr, addr, addr), at); err != nil || len(res.samples) == 0 {
		t.Errorf("the transfer was not running at T by its metrics (walk done and everything done): %v %v", res, err)
	}

	// The limit holds the transfer back, and the verdict says so.
	for q, want := range map[string]float64{
		fmt.Sprintf(`bulkmove_bottleneck{instance=%q, resource="bwlimit"}`, addr):    1,
		fmt.Sprintf(`bulkmove_more_streams_would_help{instance=%q}`, addr):           0,
		fmt.Sprintf(`bulkmove_job_running{instance=%q}`, addr):                       1,
		fmt.Sprintf(`count(bulkmove_receiver_cpu_seconds_total{instance=%q})`, addr): 2, // two agents: one series each
	} {
		if res, err := prom.query(q, at); err != nil || len(res.samples) != 1 || res.samples[0].value != want {
			t.Errorf("%s at T: %v %v, want %v", q, res, err, want)
		}
	}

	// Lift the limit, and let it finish.
	job.lift(t, addr, token)
	code := job.release(t, 60*time.Second)
	if code != 0 {
		t.Fatalf("bulkmove exited with %d:\n%s", code, job.log())
	}
	t.Logf("transfer done after %.1fs", time.Since(start).Seconds())

	// Prometheus evaluated every rule without error, and none fired.
	for _, r := range prom.rules(t) {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %q, last error %q", r.Name, r.Health, r.LastError)
		}
	}
	var alerts struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(prom.get("/api/v1/alerts")), &alerts); err != nil {
		t.Error(err)
	}
	for _, a := range alerts.Data.Alerts {
		t.Errorf("alert %s is %s during a healthy transfer: %v", a.Labels["alertname"], a.State, a.Labels)
	}

	// What the job left for node_exporter passes promtool's checks, holds
	// its outcome, and no Go or process family.
	_, promtool := tools(t)
	b, err := os.ReadFile(textfile)
	if err != nil {
		t.Fatal(err)
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = bytes.NewReader(b)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics < %s: %v\n%s", textfile, err, out)
	}
	for _, want := range []string{"\nbulkmove_job_last_exit_code 0\n", "\nbulkmove_job_running 0\n", "\nbulkmove_job_last_success_timestamp_seconds "} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the textfile lacks %q", strings.TrimSpace(want))
		}
	}
	if m := regexp.MustCompile(`(?m)^(go|process)_\w+`).Find(b); m != nil {
		t.Errorf("the textfile holds %s: node_exporter exports the Go and process families itself", m)
	}
	t.Logf("runtime %.1fs", time.Since(start).Seconds())
}

// ---------------------------------------------------------------- dashboard

type located struct{ where, expr string }

func readDashboard(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// TestDashboardShape: the dashboard is one Grafana can import with the
// data source and job/instance variables, and every query goes to the
// chosen data source and selects by job and instance.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if v, _ := d["schemaVersion"].(float64); v < 36 {
		t.Errorf("schemaVersion %v, want a current one (39)", d["schemaVersion"])
	}
	vars := map[string]string{}
	tl, _ := d["templating"].(map[string]any)
	list, _ := tl["list"].([]any)
	for _, v := range list {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		typ, _ := m["type"].(string)
		vars[name] = typ
	}
	for name, typ := range map[string]string{"datasource": "datasource", "job": "query", "instance": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s: type %q, want %q", name, vars[name], typ)
		}
	}
	exprs, _ := dashboardQueries(d)
	for _, e := range exprs {
		for _, sel := range []string{`job=~"$job"`, `instance=~"$instance"`} {
			if !strings.Contains(e.expr, sel) {
				t.Errorf("%s: no %s in %s", e.where, sel, e.expr)
			}
		}
	}
	walkPanels(d["panels"], func(p map[string]any, where string) {
		if p["type"] == "row" {
			return
		}
		for _, ds := range append([]any{p["datasource"]}, targetsOf(p)...) {
			m, _ := ds.(map[string]any)
			if m["datasource"] != nil { // a target
				m, _ = m["datasource"].(map[string]any)
			}
			if m["uid"] != "${datasource}" {
				t.Errorf("%s: datasource %v, want uid ${datasource}", where, m)
			}
		}
	})
}

func targetsOf(p map[string]any) []any {
	ts, _ := p["targets"].([]any)
	return ts
}

// walkPanels calls f for every panel, including those nested in rows.
func walkPanels(v any, f func(p map[string]any, where string)) {
	ps, _ := v.([]any)
	for _, p := range ps {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		title, _ := m["title"].(string)
		f(m, fmt.Sprintf("panel %q", title))
		walkPanels(m["panels"], f)
	}
}

// dashboardQueries returns every target expression of every panel, and
// every query of the query variables.
func dashboardQueries(d map[string]any) (exprs, varQueries []located) {
	walkPanels(d["panels"], func(p map[string]any, where string) {
		for _, tg := range targetsOf(p) {
			m, _ := tg.(map[string]any)
			if e, _ := m["expr"].(string); e != "" {
				exprs = append(exprs, located{fmt.Sprintf("%s target %v", where, m["refId"]), e})
			}
		}
	})
	tl, _ := d["templating"].(map[string]any)
	list, _ := tl["list"].([]any)
	for _, v := range list {
		m, _ := v.(map[string]any)
		if m["type"] != "query" {
			continue
		}
		q, _ := m["query"].(string)
		if qm, ok := m["query"].(map[string]any); ok {
			q, _ = qm["query"].(string)
		}
		varQueries = append(varQueries, located{fmt.Sprintf("variable $%v", m["name"]), q})
	}
	return exprs, varQueries
}

var (
	varRE         = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)`)
	labelValuesRE = regexp.MustCompile(`(?s)^label_values\((.*),\s*(\w+)\s*\)$`)
)

// substitute replaces Grafana variables ($name, ${name}, ${name:fmt},
// [[name]]) by their values; an unknown variable is an error.
func substitute(expr string, vars map[string]string) (string, error) {
	var unknown []string
	out := varRE.ReplaceAllStringFunc(expr, func(s string) string {
		m := varRE.FindStringSubmatch(s)
		name := m[1] + m[2] + m[3]
		v, ok := vars[name]
		if !ok {
			unknown = append(unknown, s)
			return s
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variables %v in %s", unknown, expr)
	}
	return out, nil
}

// ---------------------------------------------------------------- alert rules

// measurements cuts an alert expression into what it measures, for
// evaluation without its thresholds: it splits expr at its top-level
// (outside any brackets or strings) binary operators of the lowest
// precedence present among "or", then "and"/"unless", then the
// comparisons (== != > < >= <=); drops the "bool" and vector-matching
// modifiers (on, ignoring, group_left, group_right) that follow those
// operators and the parentheses around an operand; recurses into each
// operand; and drops the operands that are number literals. Arithmetic is
// kept whole: "rate(a[5m]) < 0.25 * avg(rate(a[5m]))" gives "rate(a[5m])"
// and "0.25 * avg(rate(a[5m]))".
func measurements(expr string) []string {
	expr = unwrap(strings.TrimSpace(expr))
	if expr == "" {
		return nil
	}
	ops := topLevelOps(expr)
	best := 0
	for _, o := range ops {
		if best == 0 || o.prec < best {
			best = o.prec
		}
	}
	if best == 0 {
		if _, err := strconv.ParseFloat(expr, 64); err == nil {
			return nil
		}
		return []string{expr}
	}
	var out []string
	from := 0
	for _, o := range ops {
		if o.prec != best {
			continue
		}
		out = append(out, measurements(stripModifiers(expr[from:o.start]))...)
		from = o.end
	}
	return append(out, measurements(stripModifiers(expr[from:]))...)
}

type op struct{ start, end, prec int }

func isIdent(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// scan calls f for each byte of s outside brackets and strings, with its
// index; f returns how many bytes to skip.
func scan(s string, f func(i int) int) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\'' || c == '`':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' && c != '`' {
					i++
				}
			}
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case depth == 0:
			i += f(i)
		}
	}
}

// topLevelOps lists the set and comparison operators of s outside brackets.
func topLevelOps(s string) []op {
	var ops []op
	scan(s, func(i int) int {
		if isIdent(s[i]) {
			if i > 0 && isIdent(s[i-1]) {
				return 0
			}
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			switch s[i:j] {
			case "or":
				ops = append(ops, op{i, j, 1})
			case "and", "unless":
				ops = append(ops, op{i, j, 2})
			}
			return j - i - 1
		}
		for _, c := range []string{"==", "!=", ">=", "<=", ">", "<"} {
			if strings.HasPrefix(s[i:], c) {
				ops = append(ops, op{i, i + len(c), 3})
				return len(c) - 1
			}
		}
		return 0
	})
	return ops
}

// stripModifiers removes the modifiers a binary operator may carry from
// the start of its right operand.
func stripModifiers(s string) string {
	for {
		s = strings.TrimSpace(s)
		j := 0
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		switch s[:j] {
		case "bool":
			s = s[j:]
		case "on", "ignoring", "group_left", "group_right":
			rest := strings.TrimSpace(s[j:])
			if strings.HasPrefix(rest, "(") {
				if k := closing(rest); k >= 0 {
					rest = rest[k+1:]
				}
			}
			s = rest
		default:
			return s
		}
	}
}

// unwrap removes parentheses around the whole of s.
func unwrap(s string) string {
	for strings.HasPrefix(s, "(") && closing(s) == len(s)-1 {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// closing returns the index of the bracket that closes the one s starts
// with, skipping strings; -1 if there is none.
func closing(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'', '`':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' && c != '`' {
					i++
				}
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// TestMeasurements pins how alert expressions are cut.
func TestMeasurements(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`increase(a_total[5m]) > 0`, []string{`increase(a_total[5m])`}},
		{`sum by (job, stream) (rate(a[5m])) < on (job) group_left () 0.25 * avg by (job) (rate(a[5m]))`,
			[]string{`sum by (job, stream) (rate(a[5m]))`, `0.25 * avg by (job) (rate(a[5m]))`}},
		{`(x + on(job) y) == 0 and on(job) (time() - s) > 300 and on(job) (w == 0 or d < p)`,
			[]string{`x + on(job) y`, `time() - s`, `w`, `d`, `p`}},
		{`a{l="x or y", m=~"a>b"} == bool 1 unless ignoring(x) b`, []string{`a{l="x or y", m=~"a>b"}`, `b`}},
		{`(a) + (b)`, []string{`(a) + (b)`}},
		{`order_total >= 1`, []string{`order_total`}},
	} {
		got := measurements(c.expr)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("measurements(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// ---------------------------------------------------------------- query results

type result struct {
	kind    string
	samples []sample
}

type sample struct {
	labels map[string]string
	value  float64
}

func (r result) max() float64 {
	m := math.Inf(-1)
	for _, s := range r.samples {
		m = math.Max(m, s.value)
	}
	return m
}

func (r result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %d", r.kind, len(r.samples))
	for i, s := range r.samples {
		if i == 3 {
			b.WriteString(" ...")
			break
		}
		fmt.Fprintf(&b, " %v=%g", s.labels, s.value)
	}
	return b.String()
}

type check struct {
	where, query string
	want         func(result) error
	names        []string // the metrics the query names
}

// metricNameRE matches the metric names of the dashboard's and the rules'
// queries: bulkmove's own, and the process's (process_cpu_seconds_total).
var metricNameRE = regexp.MustCompile(`\b(?:bulkmove|process|go)_[a-z0-9_]+\b`)

// metricNames lists the metric names q names.
func metricNames(q string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range metricNameRE.FindAllString(q, -1) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// without lists the names not in set.
func without(names []string, set map[string]bool) []string {
	var out []string
	for _, n := range names {
		if !set[n] {
			out = append(out, n)
		}
	}
	return out
}

func hasData(r result) error {
	for _, s := range r.samples {
		if !math.IsNaN(s.value) {
			return nil
		}
	}
	if len(r.samples) == 0 {
		return errors.New("empty result")
	}
	return fmt.Errorf("only NaN: %v", r)
}

func isEmpty(r result) error {
	if len(r.samples) > 0 {
		return fmt.Errorf("fires during a healthy transfer: %v", r)
	}
	return nil
}

func hasLabel(label string) func(result) error {
	return func(r result) error {
		if len(r.samples) == 0 {
			return errors.New("empty result")
		}
		for _, s := range r.samples {
			if s.labels[label] == "" {
				return fmt.Errorf("a series without label %s: %v", label, s.labels)
			}
		}
		return nil
	}
}

// ---------------------------------------------------------------- Prometheus

type promServer struct {
	base string
	out  *syncBuffer
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startDaemon starts cmd, stopped (SIGTERM, SIGKILL 10 s later) when the
// test ends; done is closed when it has exited.
func startDaemon(t *testing.T, cmd *exec.Cmd) (done chan struct{}) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return done
}

func startPrometheus(t *testing.T, bin, cfg, tsdb string) *promServer {
	t.Helper()
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := &promServer{base: "http://" + listen, out: &syncBuffer{}}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+tsdb,
		"--web.listen-address="+listen, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.out, p.out
	done := startDaemon(t, cmd)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", p.log())
		default:
		}
		if resp, err := http.Get(p.base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30 s:\n%s", p.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *promServer) log() string { return p.out.String() }

func (p *promServer) get(path string) string {
	resp, err := http.Get(p.base + path)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// query evaluates q at instant at through /api/v1/query.
func (p *promServer) query(q string, at time.Time) (result, error) {
	v := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64)}}
	resp, err := http.PostForm(p.base+"/api/v1/query", v)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return result{}, fmt.Errorf("HTTP %s: %v", resp.Status, err)
	}
	if r.Status != "success" {
		return result{}, fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	res := result{kind: r.Data.ResultType}
	parse := func(pair []any) (float64, error) {
		if len(pair) != 2 {
			return 0, fmt.Errorf("bad sample %v", pair)
		}
		s, _ := pair[1].(string)
		return strconv.ParseFloat(s, 64)
	}
	switch r.Data.ResultType {
	case "vector":
		var vs []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vs); err != nil {
			return res, err
		}
		for _, x := range vs {
			f, err := parse(x.Value)
			if err != nil {
				return res, err
			}
			res.samples = append(res.samples, sample{x.Metric, f})
		}
	case "scalar":
		var pair []any
		if err := json.Unmarshal(r.Data.Result, &pair); err != nil {
			return res, err
		}
		f, err := parse(pair)
		if err != nil {
			return res, err
		}
		res.samples = append(res.samples, sample{nil, f})
	default:
		return res, fmt.Errorf("result type %s, want an instant vector or a scalar", r.Data.ResultType)
	}
	return res, nil
}

// names returns the metric names of the series scraped from the target
// instance, at at.
func (p *promServer) names(instance string, at time.Time) (map[string]bool, error) {
	res, err := p.query(fmt.Sprintf(`count by (__name__) ({instance=%q, __name__=~".+"})`, instance), at)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range res.samples {
		out[s.labels["__name__"]] = true
	}
	return out, nil
}

type rule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Type      string `json:"type"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// rules returns the rules Prometheus loaded, as it prints them.
func (p *promServer) rules(t *testing.T) []rule {
	t.Helper()
	var r struct {
		Status string
		Data   struct {
			Groups []struct {
				File  string `json:"file"`
				Rules []rule `json:"rules"`
			} `json:"groups"`
		}
	}
	body := p.get("/api/v1/rules")
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		t.Fatalf("/api/v1/rules: %v %s", err, body)
	}
	var out []rule
	for _, g := range r.Data.Groups {
		out = append(out, g.Rules...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ---------------------------------------------------------------- the transfer

type transfer struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	addr   chan string
	done   chan struct{}
}

// startJob starts a transfer slowed by a bandwidth limit that the control
// endpoint (with the token in the file token) lifts, writing textfile as
// it goes.
func startJob(t *testing.T, bin, src, dst, textfile, token string) *transfer {
	t.Helper()
	cmd := exec.Command(bin, "-j", "2", "--via-agent", "--compress=zstd", "--batch-files", "50", "--fsync",
		"--bwlimit", jobLimit, "--metrics-addr", "127.0.0.1:0", "--control-token", token,
		"--metrics-textfile", textfile, "--metrics-textfile-interval", "1s", src, dst)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	j := &transfer{cmd: cmd, stderr: &syncBuffer{}, addr: make(chan string, 1), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			j.stderr.Write([]byte(line + "\n"))
			if _, rest, ok := strings.Cut(line, "metrics on http://"); ok {
				select {
				case j.addr <- strings.TrimSuffix(strings.Fields(rest)[0], "/metrics"):
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(j.done)
	}()
	t.Cleanup(func() {
		if !j.exited() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		<-j.done
	})
	return j
}

// jobLimit holds the transfer's 30,000 files to a minute or more, however
// well they compress, until the test lifts it.
const jobLimit = "64K"

func (j *transfer) waitAddr(t *testing.T) string {
	t.Helper()
	select {
	case a := <-j.addr:
		return a
	case <-j.done:
		t.Fatalf("bulkmove exited without a metrics address:\n%s", j.log())
	case <-time.After(10 * time.Second):
		t.Fatalf("no metrics address from bulkmove after 10 s:\n%s", j.log())
	}
	return ""
}

func (j *transfer) exited() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

func (j *transfer) log() string { return j.stderr.String() }

// lift turns the job's bandwidth limit off through its control endpoint.
func (j *transfer) lift(t *testing.T, addr, tokenFile string) {
	t.Helper()
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, "http://"+addr+"/bwlimit", strings.NewReader("off"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT /bwlimit: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT /bwlimit off: %s: %s", resp.Status, body)
	}
}

// release waits for the job's exit code.
func (j *transfer) release(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-j.done:
	case <-time.After(timeout):
		t.Fatalf("bulkmove still running %v after its limit was lifted:\n%s", timeout, j.log())
	}
	return j.cmd.ProcessState.ExitCode()
}

func randomHex(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ---------------------------------------------------------------- helpers

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeAtomic writes data to path through a temporary file in its
// directory, so that file_sd never reads half of it.
func writeAtomic(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
