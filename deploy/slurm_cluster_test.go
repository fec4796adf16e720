//go:build linux

package deploy_test

// The Slurm job array on a real one-node cluster: the test starts munged,
// slurmctld and slurmd (Debian's packages munge, slurmctld, slurmd and
// slurm-client) as root with a slurm.conf of its own in a temporary
// directory (no systemd and no cgroups: proctrack/linuxproc, task/none),
// and submits slurm/bulkmove-array.sbatch with the command lines of its
// header. It runs only with BULKMOVE_SLURM=1 (`make test-slurm`, which
// .ci/run calls after `make test`), so that `go test ./...` does not start
// a cluster; then, when the cluster cannot start, it skips with the reason,
// or fails when CI is set.

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/sharder"
)

// slurmCluster is a running one-node cluster.
type slurmCluster struct {
	dir   string   // slurm.conf, state, spool and logs
	env   []string // the environment of every Slurm command: SLURM_CONF
	procs []*exec.Cmd
}

// cannotStart skips t, or fails it under CI, for a cluster that cannot be
// started here.
func cannotStart(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg + "; skipping")
}

// sbin finds a daemon on PATH or in /usr/sbin (not on a user's PATH).
func sbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found on PATH or in /usr/sbin", name)
	}
	return p, nil
}

// startSlurm starts munged, slurmctld and slurmd in dir and waits until the
// node is idle; t's cleanup cancels what still runs and stops them.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	if os.Getenv("BULKMOVE_SLURM") != "1" {
		t.Skip("starts a Slurm cluster: run with BULKMOVE_SLURM=1 (make test-slurm)")
	}
	if os.Geteuid() != 0 {
		cannotStart(t, "the Slurm cluster needs root (slurmd runs the jobs of any user)")
	}
	bins := map[string]string{}
	for _, name := range []string{"munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo"} {
		p, err := sbin(name)
		if err != nil {
			cannotStart(t, "%v (Debian packages: munge slurmctld slurmd slurm-client)", err)
		}
		bins[name] = p
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".") // slurmctld compares its short name with SlurmctldHost

	c := &slurmCluster{dir: t.TempDir()}
	for _, d := range []string{"munge", "state", "spool", "log"} {
		if err := os.Mkdir(filepath.Join(c.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(c.dir, "munge", "socket")
	key := filepath.Join(c.dir, "munge", "munge.key")
	if out, err := exec.Command(bins["mungekey"], "--create", "--keyfile", key).CombinedOutput(); err != nil {
		cannotStart(t, "mungekey: %v\n%s", err, out)
	}
	conf := filepath.Join(c.dir, "slurm.conf")
	// CPUs and memory as the script's #SBATCH lines ask of a node (8 CPUs
	// and 4G a task, 4 tasks at once), more than this machine has:
	// config_overrides lets slurmd report the configured node.
	text := fmt.Sprintf(`ClusterName=bulkmovetest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[4]s
CredType=cred/munge
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/log/slurmctld.log
SlurmdLogFile=%[5]s/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=900
KillWait=30
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=32 RealMemory=16384 State=UNKNOWN
PartitionName=test Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP
`, host, freePort(t), freePort(t), sock, c.dir)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c.env = append(os.Environ(), "SLURM_CONF="+conf)

	t.Cleanup(func() { c.stop(t) })
	c.start(t, bins["munged"], "--foreground", "--force", "--socket", sock, "--key-file", key,
		"--log-file", filepath.Join(c.dir, "log", "munged.log"), "--pid-file", filepath.Join(c.dir, "munge", "pid"),
		"--seed-file", filepath.Join(c.dir, "munge", "seed"))
	c.waitFor(t, "munged's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	c.start(t, bins["slurmctld"], "-D", "-f", conf)
	c.start(t, bins["slurmd"], "-D", "-f", conf, "-N", host)
	c.waitFor(t, "the node idle in sinfo", func() bool {
		out, _ := c.cmd("sinfo", "-h", "-o", "%T").Output()
		return strings.TrimSpace(string(out)) == "idle"
	})
	return c
}

// start runs a daemon of the cluster in the foreground, its output in
// log/NAME.out.
func (c *slurmCluster) start(t *testing.T, bin string, args ...string) {
	t.Helper()
	out, err := os.Create(filepath.Join(c.dir, "log", filepath.Base(bin)+".out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = c.env, out, out
	if err := cmd.Start(); err != nil {
		cannotStart(t, "%s: %v", bin, err)
	}
	c.procs = append(c.procs, cmd)
}

// waitFor polls cond for up to 30 s; a cluster not up by then cannot start.
func (c *slurmCluster) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(200 * time.Millisecond) {
		for _, p := range c.procs {
			if p.ProcessState != nil || p.Process.Signal(syscall.Signal(0)) != nil {
				c.dumpLogs(t)
				cannotStart(t, "the Slurm cluster: %s exited waiting for %s", filepath.Base(p.Path), what)
			}
		}
		if time.Now().After(end) {
			c.dumpLogs(t)
			cannotStart(t, "the Slurm cluster: no %s after 30s", what)
		}
	}
}

// stop cancels the jobs left (so that no slurmstepd outlives the cluster)
// and stops the daemons, last started first.
func (c *slurmCluster) stop(t *testing.T) {
	if t.Failed() {
		c.dumpLogs(t)
	}
	if len(c.procs) >= 3 {
		c.cmd("scancel", "--user=root").Run()
		for end := time.Now().Add(45 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			out, err := c.cmd("squeue", "-h").Output()
			if err != nil || len(bytes.TrimSpace(out)) == 0 {
				break
			}
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
}

func (c *slurmCluster) dumpLogs(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(c.dir, "log", "*"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		t.Logf("%s (the end):\n%s", filepath.Base(l), b)
	}
}

// cmd is a Slurm command of this cluster.
func (c *slurmCluster) cmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = c.env
	return cmd
}

// slurmJobs is where the jobs of one test run: its working directory
// (where sbatch writes the tasks' logs) and the environment exported to
// them (--export=ALL).
type slurmJobs struct {
	c   *slurmCluster
	dir string
	env []string
}

// sbatch submits the script with args (as its header writes them, the
// script's path last) and returns the job id (--parsable).
func (j *slurmJobs) sbatch(t *testing.T, args ...string) string {
	t.Helper()
	script, err := filepath.Abs(sbatchFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := j.c.cmd("sbatch", append(append([]string{"--parsable"}, args...), script)...)
	cmd.Env, cmd.Dir = j.env, j.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	id := strings.TrimSpace(string(out))
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch %s printed %q, want a job id", strings.Join(args, " "), out)
	}
	return id
}

// run runs a Slurm command and returns its output, failing t if it fails.
func (j *slurmJobs) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := j.c.cmd(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// task is an array task as scontrol shows it.
type task struct {
	state, exit, reason string
}

var (
	reTaskID  = regexp.MustCompile(`\bArrayTaskId=(\S+)`)
	reState   = regexp.MustCompile(`\bJobState=(\S+)`)
	reExit    = regexp.MustCompile(`\bExitCode=(\S+)`)
	reReason  = regexp.MustCompile(`\bReason=(\S+)`)
	reSummary = regexp.MustCompile(`(?m)^bulkmove: ([0-9,]+) files, .*; ([0-9,]+) up to date(?: \(([0-9,]+) of them named by the resume journal\))?.*; ([0-9,]+) errors`)
)

// tasks returns the tasks of array job id, by index; a pending range
// that is not split yet (ArrayTaskId=0-3) is left out.
func (j *slurmJobs) tasks(t *testing.T, id string) map[int]task {
	t.Helper()
	m := map[int]task{}
	for _, line := range strings.Split(j.run(t, "scontrol", "show", "job", "-o", id), "\n") {
		f := func(re *regexp.Regexp) string {
			if s := re.FindStringSubmatch(line); s != nil {
				return s[1]
			}
			return ""
		}
		i, err := strconv.Atoi(f(reTaskID))
		if err != nil {
			continue
		}
		m[i] = task{state: f(reState), exit: f(reExit), reason: f(reReason)}
	}
	return m
}

// ended reports whether a job in state s has ended.
func ended(s string) bool {
	switch s {
	case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT", "":
		return false
	}
	return true
}

// wait waits until the n tasks of job id have ended and returns them.
func (j *slurmJobs) wait(t *testing.T, id string, n int) map[int]task {
	t.Helper()
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		m := j.tasks(t, id)
		done := len(m) == n
		for _, tk := range m {
			done = done && ended(tk.state)
		}
		if done {
			return m
		}
		if time.Now().After(end) {
			t.Fatalf("job %s: its %d tasks have not ended after 90s: %v", id, n, m)
		}
	}
}

// log returns task i of job id's output file.
func (j *slurmJobs) log(t *testing.T, id string, i int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(j.dir, fmt.Sprintf("bulkmove-%s_%d.out", id, i)))
	if err != nil {
		t.Errorf("task %s_%d's log: %v", id, i, err)
	}
	return string(b)
}

// wantDone checks that every task of the job completed with exit 0.
func (j *slurmJobs) wantDone(t *testing.T, id string, tasks map[int]task) {
	t.Helper()
	for i, tk := range tasks {
		if tk.state != "COMPLETED" || tk.exit != "0:0" {
			t.Errorf("task %s_%d: %s, exit %s (%s), want COMPLETED, exit 0:0; its log:\n%s", id, i, tk.state, tk.exit, tk.reason, j.log(t, id, i))
		}
	}
}

// summary parses bulkmove's summary line in a task's log: the files sent,
// up to date, of those named by the journal, and the errors; ok is false
// when there is no summary.
func summary(log string) (sent, upToDate, journal, errs int, ok bool) {
	m := reSummary.FindAllStringSubmatch(log, -1)
	if m == nil {
		return 0, 0, 0, 0, false
	}
	last := m[len(m)-1]
	n := func(s string) int { v, _ := strconv.Atoi(strings.ReplaceAll(s, ",", "")); return v }
	return n(last[1]), n(last[2]), n(last[3]), n(last[4]), true
}

// newJobs makes the working directory of one test's jobs and their
// environment: SRC, DEST, the bulkmove built from this tree, 2 streams a
// task (this machine has few CPUs), and a HOME of their own (the journals
// are kept under it).
func newJobs(t *testing.T, c *slurmCluster, bin, src, dst string, env ...string) *slurmJobs {
	j := &slurmJobs{c: c, dir: t.TempDir()}
	home := t.TempDir()
	j.env = append(append(c.env[:len(c.env):len(c.env)], "HOME="+home, "SRC="+src, "DEST="+dst, "BULKMOVE="+bin, "STREAMS=2"), env...)
	return j
}

// treeDir returns a directory for test trees, on tmpfs where there is one.
func treeDir(t *testing.T) string {
	d, err := os.MkdirTemp("/dev/shm", "bulkmove-slurm-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestSlurmCluster submits the job array as the script's header says: an
// array of 4 tasks, the final pass depending on it (afterok), then the
// VERIFY=1 array and the merge of its reports, each depending on the one
// before. One task is made to fail (a non-empty directory at DEST where
// its shard has a file): it must exit 2 while the others exit 0, the final
// pass must wait, and the task rerun alone (SHARDS=4), after the cause is
// removed, must resume (only the blocked file sent, the rest named by its
// journal) and release the final pass. The copy must then be exact and the
// merged verify report clean. Then scancel of a running task (slowed by
// --bwlimit) must leave no file half-written under its name, and its rerun
// must finish the copy.
func TestSlurmCluster(t *testing.T) {
	start := time.Now()
	c := startSlurm(t)
	t.Logf("the cluster is up in %.1fs", time.Since(start).Seconds())
	bin := testbin.Build(t)

	t.Run("array", func(t *testing.T) {
		start := time.Now()
		root := treeDir(t)
		src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
		if err := gentree.Mixed(src, 1000, 1); err != nil {
			t.Fatal(err)
		}
		// A file of shard 2's in the way: a non-empty directory at its name.
		blocked := ""
		filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || blocked != "" || !d.Type().IsRegular() {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if sharder.ShardOf(filepath.Dir(rel), 4) == 2 {
				blocked = rel
			}
			return nil
		})
		if blocked == "" {
			t.Fatal("shard 2 of 4 has no file in the test tree")
		}
		if err := os.MkdirAll(filepath.Join(dst, blocked, "in-the-way"), 0o755); err != nil {
			t.Fatal(err)
		}
		j := newJobs(t, c, bin, src, dst)

		jid := j.sbatch(t, "--export=ALL", "--array=0-3")
		final := j.sbatch(t, "--dependency=afterok:"+jid, "--array=0", "--export=ALL,FINAL=1")
		vid := j.sbatch(t, "--dependency=afterok:"+final, "--export=ALL,VERIFY=1", "--array=0-3")
		sum := j.sbatch(t, "--dependency=afterok:"+vid, "--array=0", "--export=ALL,VERIFY=1,FINAL=1")

		tasks := j.wait(t, jid, 4)
		for i, tk := range tasks {
			log := j.log(t, jid, i)
			if !strings.Contains(log, fmt.Sprintf("shard %d/4 of %s", i, src)) {
				t.Errorf("task %s_%d's log does not name its shard %d/4:\n%s", jid, i, i, log)
			}
			if i == 2 {
				if tk.state != "FAILED" || tk.exit != "2:0" || !strings.Contains(log, blocked+": a non-empty directory is in the way") {
					t.Errorf("task %s_2, with %s blocked: %s, exit %s, want FAILED, exit 2:0 (bulkmove's) and the cause in its log:\n%s", jid, blocked, tk.state, tk.exit, log)
				}
				continue
			}
			if tk.state != "COMPLETED" || tk.exit != "0:0" {
				t.Errorf("task %s_%d: %s, exit %s, want COMPLETED, exit 0:0; its log:\n%s", jid, i, tk.state, tk.exit, log)
			}
		}
		// slurmctld finds the dependency failed at its next look.
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			f := j.tasks(t, final)[0]
			if f.state == "PENDING" && f.reason == "DependencyNeverSatisfied" {
				break
			}
			if f.state != "PENDING" || time.Now().After(end) {
				t.Fatalf("the final pass after a failed task: %s (%s), want PENDING (DependencyNeverSatisfied)", f.state, f.reason)
			}
		}
		if t.Failed() {
			t.FailNow()
		}

		// The cause removed, task 2 alone, and the final pass waits for it.
		if err := os.RemoveAll(filepath.Join(dst, blocked)); err != nil {
			t.Fatal(err)
		}
		rerun := j.sbatch(t, "--array=2", "--export=ALL,SHARDS=4")
		j.run(t, "scontrol", "update", "JobId="+final, "Dependency=afterok:"+rerun)
		j.wantDone(t, rerun, j.wait(t, rerun, 1))
		log := j.log(t, rerun, 2)
		sent, _, journal, errs, ok := summary(log)
		if !ok || sent != 1 || journal == 0 || errs != 0 || !strings.Contains(log, "shard 2/4 of ") {
			t.Errorf("the rerun of task 2 (SHARDS=4): want shard 2/4, 1 file sent (the one that was blocked), the rest up to date as named by its journal, 0 errors; its log:\n%s", log)
		}

		j.wantDone(t, final, j.wait(t, final, 1))
		j.wantDone(t, vid, j.wait(t, vid, 4))
		j.wantDone(t, sum, j.wait(t, sum, 1))
		if log := j.log(t, sum, 0); !strings.Contains(log, "verify-summary: 4 of 4 shards") || !strings.Contains(log, " 0 differ, 0 missing, 0 extra") {
			t.Errorf("the merged verify report: want 4 of 4 shards and no difference:\n%s", log)
		}
		treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
		t.Logf("array of 4, a failed task rerun, the final pass and the verify: %.1fs", time.Since(start).Seconds())
	})

	t.Run("scancel", func(t *testing.T) {
		start := time.Now()
		root := treeDir(t)
		src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
		// Shard 1's directory holds 6 files of 4 MiB, a batch each; at 2
		// MB/s they take 12 s. The task is cancelled once the first is in
		// place: bulkmove finishes the batches in flight (well within
		// Slurm's KillWait), starts no other, and leaves every name at
		// DEST whole.
		big := ""
		for i := 0; big == ""; i++ {
			if d := fmt.Sprintf("big%d", i); sharder.ShardOf(d, 4) == 1 {
				big = d
			}
		}
		if err := gentree.Large(filepath.Join(src, big), 6, 4<<20); err != nil {
			t.Fatal(err)
		}
		if err := gentree.Small(filepath.Join(src, "small"), 200, 8, 1024); err != nil {
			t.Fatal(err)
		}
		j := newJobs(t, c, bin, src, dst, "EXTRA=--bwlimit 2M --batch-files 1")
		jid := j.sbatch(t, "--export=ALL", "--array=0-3")

		var whole []string
		for end := time.Now().Add(60 * time.Second); len(whole) == 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("no file of %s whole at DEST after 60s; task 1's log:\n%s", big, j.log(t, jid, 1))
			}
			whole = wholeFiles(t, src, filepath.Join(dst, big))
		}
		j.run(t, "scancel", jid+"_1")
		tasks := j.wait(t, jid, 4)
		if tk := tasks[1]; tk.state != "CANCELLED" {
			t.Errorf("task %s_1 after scancel: %s, exit %s, want CANCELLED", jid, tk.state, tk.exit)
		}
		log := j.log(t, jid, 1)
		if !strings.Contains(log, "bulkmove: interrupted") {
			t.Errorf("task %s_1's bulkmove did not see the SIGTERM of scancel (no \"interrupted\"); its log:\n%s", jid, log)
		} else {
			t.Logf("task %s_1's log:\n%s", jid, log)
		}
		// Nothing half-written: every name at DEST holds its whole file.
		var names []string
		filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, _ := filepath.Rel(dst, p)
			names = append(names, rel)
			a, err1 := os.ReadFile(p)
			b, err2 := os.ReadFile(filepath.Join(src, rel))
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Errorf("after scancel, DEST has %s of %d bytes, not the source's whole file (%d bytes; %v, %v)", rel, len(a), len(b), err1, err2)
			}
			return nil
		})
		inBig := len(wholeFiles(t, src, filepath.Join(dst, big)))
		if inBig >= 6 {
			t.Errorf("all 6 files of %s arrived after scancel (%d when it was sent): bulkmove did not stop", big, len(whole))
		}
		t.Logf("scancel of task 1 with %d of the 6 files of %s in place: %d after", len(whole), big, inBig)

		rerun := j.sbatch(t, "--array=1", "--export=ALL,SHARDS=4,EXTRA=")
		j.wantDone(t, rerun, j.wait(t, rerun, 1))
		if sent, _, _, errs, ok := summary(j.log(t, rerun, 1)); !ok || sent < 6-inBig || errs != 0 {
			t.Errorf("the rerun of task 1: want at least the %d files of %s not in place sent, 0 errors; its log:\n%s", 6-inBig, big, j.log(t, rerun, 1))
		}
		final := j.sbatch(t, "--array=0", "--export=ALL,FINAL=1,EXTRA=")
		j.wantDone(t, final, j.wait(t, final, 1))
		treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
		t.Logf("scancel of a running task and its rerun: %.1fs", time.Since(start).Seconds())
	})
}

// wholeFiles returns the files in dir (at DEST) whose content is the
// source's in full.
func wholeFiles(t *testing.T, src, dir string) []string {
	t.Helper()
	var whole []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		a, err1 := os.ReadFile(filepath.Join(dir, e.Name()))
		b, err2 := os.ReadFile(filepath.Join(src, filepath.Base(dir), e.Name()))
		if err1 == nil && err2 == nil && bytes.Equal(a, b) {
			whole = append(whole, e.Name())
		}
	}
	return whole
}
