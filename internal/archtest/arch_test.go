package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the project's module path; patterns in the rules are relative
// to it.
const module = "github.com/bulkmove/bulkmove"

// rule constrains the project dependencies of the packages From matches.
// A pattern is a package path relative to the module, and "x/..." matches
// x and every package below it. Exactly one of Only and Not is set.
type rule struct {
	Name   string
	From   []string // the packages the rule is about
	Except []string // packages From matches that the rule leaves out
	Only   []string // they may depend on these project packages and no other
	Not    []string // they must not depend on any of these
	// Pending, when set, says why the tree does not keep the rule yet: the
	// rule is logged, not checked.
	Pending string
}

var rules = []rule{
	{
		Name: "the data model is the leaf: it imports nothing of the project",
		From: []string{"model"},
		Only: []string{},
	},
	{
		Name: "the wire imports only the data model",
		From: []string{"wire"},
		Only: []string{"model"},
	},
	{
		Name: "the walk and the helpers below the ends import neither end, nor a transport, nor metrics",
		From: []string{"sharder", "filter", "journal", "internal/..."},
		// The engine drives both ends; archtest's test builds nothing.
		Except: []string{"internal/engine/..."},
		Not:    []string{"send/...", "receive/...", "transport/...", "metrics/...", "cmd/..."},
	},
	{
		Name: "the engine's controllers do not import the engine, an end, a transport or metrics",
		From: []string{"internal/engine/throttle"},
		Not:  []string{"internal/engine", "send/...", "receive/...", "transport/...", "metrics/..."},
	},
	{
		Name: "metrics imports neither end: the ends report into it",
		From: []string{"metrics/..."},
		Not:  []string{"send/...", "receive/..."},
	},
	{
		Name: "the receiving side does not import the sending side",
		From: []string{"receive/..."},
		Not:  []string{"send/..."},
	},
	{
		Name: "the sending side does not import the receiving side",
		From: []string{"send/..."},
		Not:  []string{"receive/..."},
	},
	{
		Name:   "the packages below send serve the pool and its client: they do not import them",
		From:   []string{"send/..."},
		Except: []string{"send"},
		Not:    []string{"send"},
	},
	{
		// go list's Deps leave out what tests import, so a test may.
		Name: "the test support packages serve tests only: no package imports them",
		From: []string{"..."},
		Not:  []string{"internal/testbin", "internal/sshdtest", "internal/faultproxy"},
	},
	{
		Name: "the remote binary's cache sits below the SSH client: it imports no transport, neither end, nor metrics",
		From: []string{"transport/sshx/agentbin"},
		Not:  []string{"transport/...", "send/...", "receive/...", "metrics/...", "cmd/..."},
	},
	{
		Name:   "the packages below the engine serve it: they do not import it",
		From:   []string{"internal/engine/..."},
		Except: []string{"internal/engine"},
		Not:    []string{"internal/engine"},
	},
	{
		Name: "the engine's event schema is a leaf: it imports nothing of the project",
		From: []string{"internal/engine/event"},
		Only: []string{},
	},
	{
		Name: "nothing imports a command",
		From: []string{"..."},
		Not:  []string{"cmd/..."},
	},
}

// pkg is what the test reads of `go list -json`.
type pkg struct {
	ImportPath string
	Deps       []string
}

// listPackages returns every package of the module with its dependencies
// (transitive, without those of its tests).
func listPackages(t *testing.T) []pkg {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "list", "-json=ImportPath,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package")
	}
	return pkgs
}

// match says whether path (relative to the module) matches one of the
// patterns.
func match(path string, patterns []string) bool {
	for _, p := range patterns {
		if p == "..." {
			return true
		}
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if path == base || strings.HasPrefix(path, base+"/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// violations returns, for each package r applies to, the project
// dependencies r forbids it, and how many packages r applies to.
func violations(r rule, pkgs []pkg) (bad map[string][]string, applies int) {
	bad = map[string][]string{}
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok || !match(rel, r.From) || match(rel, r.Except) {
			continue
		}
		applies++
		for _, d := range p.Deps {
			dep, ok := strings.CutPrefix(d, module+"/")
			if !ok {
				continue // the standard library or another module
			}
			if r.Only != nil && !match(dep, r.Only) || r.Not != nil && match(dep, r.Not) {
				bad[rel] = append(bad[rel], dep)
			}
		}
	}
	return bad, applies
}

func TestArrows(t *testing.T) {
	pkgs := listPackages(t)
	for _, r := range rules {
		t.Run(r.Name, func(t *testing.T) {
			if (r.Only == nil) == (r.Not == nil) {
				t.Fatal("a rule sets exactly one of Only and Not")
			}
			bad, applies := violations(r, pkgs)
			if r.Pending != "" {
				t.Logf("pending (%s): %d packages would break it", r.Pending, len(bad))
				return
			}
			// A rule that applies to nothing is a rule a rename switched
			// off without anyone noticing.
			if applies == 0 {
				t.Fatalf("no package matches %q", r.From)
			}
			for _, p := range slices.Sorted(maps.Keys(bad)) {
				t.Errorf("%s depends on %s", p, strings.Join(bad[p], ", "))
			}
		})
	}
}

// The matcher and the check themselves, on a made-up graph, so that a rule
// that passes does so because the tree keeps it.
func TestRuleCheck(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "/model"},
		{ImportPath: module + "/wire", Deps: []string{"fmt", module + "/model", module + "/internal/x"}},
		{ImportPath: module + "/send", Deps: []string{module + "/receive/extract"}},
		{ImportPath: module + "/receive", Deps: []string{module + "/wire"}},
	}
	bad, n := violations(rule{From: []string{"wire"}, Only: []string{"model"}}, pkgs)
	if n != 1 || len(bad["wire"]) != 1 || bad["wire"][0] != "internal/x" {
		t.Errorf("Only: got %v over %d packages; want wire -> internal/x over 1", bad, n)
	}
	bad, n = violations(rule{From: []string{"send/..."}, Not: []string{"receive/..."}}, pkgs)
	if n != 1 || len(bad["send"]) != 1 {
		t.Errorf("Not: got %v over %d packages; want send -> receive/extract over 1", bad, n)
	}
	bad, n = violations(rule{From: []string{"receive/..."}, Not: []string{"send/..."}}, pkgs)
	if n != 1 || len(bad) != 0 {
		t.Errorf("Not, kept: got %v over %d packages; want none over 1", bad, n)
	}
	if bad, _ := violations(rule{From: []string{"..."}, Except: []string{"send/..."}, Not: []string{"receive/..."}}, pkgs); len(bad) != 0 {
		t.Errorf("Except: got %v; want none", bad)
	}
	if match("sendx", []string{"send/..."}) || !match("send/sub", []string{"send/..."}) || !match("send", []string{"send/..."}) {
		t.Error(`"send/..." must match send and send/sub, not sendx`)
	}
}
