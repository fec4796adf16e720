package deploy_test

// The Slurm job array is checked without Slurm: its #SBATCH directives are
// parsed, and the script is run by bash as sbatch would run one task, with
// the variables Slurm sets and stand-ins for srun and bulkmove on PATH that
// record the commands they are given.

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const sbatchFile = "slurm/bulkmove-array.sbatch"

// sbatchDirectives returns the #SBATCH options, as sbatch reads them: from
// the lines before the first command.
func sbatchDirectives(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(sbatchFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if n == 1 {
			if !strings.HasPrefix(line, "#!") {
				t.Fatalf("%s: line 1 is %q, want a #! line (sbatch needs one)", sbatchFile, line)
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "#SBATCH") {
			continue
		}
		rest, ok := strings.CutPrefix(line, "#SBATCH ")
		if !ok {
			break // sbatch stops reading directives at the first command
		}
		k, v, _ := strings.Cut(strings.TrimSpace(rest), "=")
		if !strings.HasPrefix(k, "--") {
			t.Errorf("%s:%d: %q: use the long form --name=value", sbatchFile, n, line)
		}
		d[k] = v
	}
	return d
}

func TestSlurmDirectives(t *testing.T) {
	d := sbatchDirectives(t)
	for _, k := range []string{"--job-name", "--array", "--nodes", "--ntasks", "--cpus-per-task", "--mem", "--time", "--output"} {
		if _, ok := d[k]; !ok {
			t.Errorf("no #SBATCH %s", k)
		}
	}
	// The indices are the shards: 0..N-1, every one of them.
	m := regexp.MustCompile(`^0-([0-9]+)(%[0-9]+)?$`).FindStringSubmatch(d["--array"])
	if m == nil {
		t.Errorf("#SBATCH --array=%s: want 0-(N-1), the shards' indices", d["--array"])
	}
	if d["--ntasks"] != "1" {
		t.Errorf("--ntasks=%s: one bulkmove a task (it runs its own streams)", d["--ntasks"])
	}
	// One log a task, not N tasks writing over each other.
	if o := d["--output"]; !strings.Contains(o, "%A") || !strings.Contains(o, "%a") {
		t.Errorf("--output=%s: want %%A and %%a in the name (one file a task)", o)
	}
}

// runScript runs the script as array task id of 0-max would run (env
// may override any variable, SLURM_ARRAY_TASK_MIN too), with stand-ins
// for srun and bulkmove that append their commands to the file log, and
// returns its output.
func runScript(t *testing.T, id, max int, env ...string) (out, log string, err error) {
	t.Helper()
	bin := t.TempDir()
	log = filepath.Join(bin, "log")
	os.WriteFile(filepath.Join(bin, "srun"), []byte("#!/bin/sh\n# srun --ntasks=1 CMD...\nshift\nexec \"$@\"\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "bulkmove"), []byte("#!/bin/sh\necho \"$*\" >>"+log+"\n[ \"$1\" = verify ] && echo '{\"event\":\"verify\"}'\nexit 0\n"), 0o755)
	script, err := filepath.Abs(sbatchFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"),
		"SLURM_ARRAY_TASK_ID="+strconv.Itoa(id), "SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_MAX="+strconv.Itoa(max),
		"SLURM_ARRAY_JOB_ID=77", "SLURM_JOB_ID=78", "SLURM_CPUS_PER_TASK=6",
		"SRC=/lustre/src", "DEST=mover:/dst")
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = t.TempDir()
	b, err := cmd.CombinedOutput()
	return string(b), log, err
}

// runTask runs the script as runScript does, fails the test if it fails,
// and returns the bulkmove commands run (one a line, arguments separated
// by spaces).
func runTask(t *testing.T, id, max int, env ...string) []string {
	t.Helper()
	out, log, err := runScript(t, id, max, env...)
	if err != nil {
		t.Fatalf("the script failed: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(log)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestSlurmTaskRunsItsShard(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	got := runTask(t, 5, 15)
	want := []string{"--shard 5/16 -j 6 --progress=none /lustre/src mover:/dst"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("task 5 of 0-15 ran\n%q\nwant\n%q", got, want)
	}
	// A rerun of task 2 alone is an array of one index: SHARDS says N.
	got = runTask(t, 2, 2, "SLURM_ARRAY_TASK_MIN=2", "SHARDS=4")
	want = []string{"--shard 2/4 -j 6 --progress=none /lustre/src mover:/dst"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("task 2 of 2-2 with SHARDS=4 ran\n%q\nwant\n%q", got, want)
	}
	// With VERIFY=1 the array checks its shards (after the final pass) and
	// moves nothing.
	reports := t.TempDir()
	got = runTask(t, 0, 6, "VERIFY=1", "REPORTS="+reports, "METRICS_PORT=9100", "EXTRA=--bwlimit 10M --exclude *.tmp")
	want = []string{
		"verify --shard 0/7 -j 6 --json --bwlimit 10M --exclude *.tmp /lustre/src mover:/dst",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("task 0 of 0-6 with VERIFY ran\n%q\nwant\n%q", got, want)
	}
	if _, err := os.Stat(filepath.Join(reports, "verify-0.json")); err != nil {
		t.Errorf("no verify report: %v", err)
	}
	// The final pass: --delete over the whole tree; with VERIFY=1, the
	// reports merged.
	got = runTask(t, 0, 0, "FINAL=1", "REPORTS="+reports)
	want = []string{"--delete -j 6 --progress=none /lustre/src mover:/dst"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the final pass ran\n%q\nwant\n%q", got, want)
	}
	got = runTask(t, 0, 0, "FINAL=1", "VERIFY=1", "REPORTS="+reports)
	want = []string{"verify-summary " + filepath.Join(reports, "verify-0.json")}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the verify summary ran\n%q\nwant\n%q", got, want)
	}
}

// TestSlurmRerunNeedsShards: a rerun of some tasks (an array not starting
// at 0) without SHARDS cannot know N, and says how to give it.
func TestSlurmRerunNeedsShards(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"SLURM_ARRAY_TASK_MIN=2"}, "SHARDS=N"},
		{[]string{"SLURM_ARRAY_TASK_MIN=2", "SHARDS=2"}, "SHARDS=2: want the number of shards"},
	} {
		out, _, err := runScript(t, 2, 2, c.env...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("task 2 of 2-2 with %q: %v, output\n%s\nwant a failure saying %q", c.env, err, out, c.want)
		}
	}
}
