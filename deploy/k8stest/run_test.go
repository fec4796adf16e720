package k8stest_test

// The manifests' own command lines, run against each other as a cluster
// would run them: each pod in a network namespace of its own (so the
// receiver and the senders all listen on port 9100, as in their pods),
// where "receiver" resolves to a stand-in for the Service that forwards
// to the receiver pod's port; the Secrets made by README.md's lines (with
// a stand-in for kubectl that writes their keys to files); each volume a
// directory, and each mountPath in the arguments that directory.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/netnstest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

func TestMain(m *testing.M) { os.Exit(testbin.WithCleanup(m).Run()) }

// need skips the test without what it needs (root: namespaces, mounts,
// owners), or fails it under CI.
func need(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, c := range []string{"unshare", "nsenter", "ip", "openssl", "sh"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "needs " + strings.Join(missing, ", ") + " (util-linux, iproute2, openssl)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// kubectlStandIn writes a Secret's keys as files in $SECRETS/NAME/, for
// the lines of README.md that make the Secrets; any other use fails.
const kubectlStandIn = `#!/bin/sh
set -e
[ "$1 $2" = "create secret" ] || { echo "kubectl stand-in: only create secret, not: $*" >&2; exit 1; }
type=$3 name=$4
shift 4
d=$SECRETS/$name
mkdir "$d"
for a; do
  case "$type $a" in
  "generic --from-literal="*) kv=${a#--from-literal=}; printf %s "${kv#*=}" >"$d/${kv%%=*}" ;;
  "generic --from-file="*=*) kv=${a#--from-file=}; cp "${kv#*=}" "$d/${kv%%=*}" ;;
  "generic --from-file="*) f=${a#--from-file=}; cp "$f" "$d/$(basename "$f")" ;;
  "tls --cert="*) cp "${a#--cert=}" "$d/tls.crt" ;;
  "tls --key="*) cp "${a#--key=}" "$d/tls.key" ;;
  *) echo "kubectl stand-in: create secret $type: unknown argument $a" >&2; exit 1 ;;
  esac
done
`

var fence = regexp.MustCompile("(?ms)^```sh\n(.*?)^```")

// readmeSecrets runs README.md's block that makes the Secrets and returns
// them: name → key → value.
func readmeSecrets(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kubeDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, m := range fence.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], "kubectl create secret") {
			if block != "" {
				t.Fatal("README.md: two blocks make Secrets")
			}
			block = m[1]
		}
	}
	if block == "" {
		t.Fatal("README.md: no ```sh block with kubectl create secret")
	}
	bin, work, out := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(kubectlStandIn), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-e", "-c", block)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SECRETS="+out)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's lines that make the Secrets: %v\n%s", err, o)
	}
	secrets := map[string]map[string][]byte{}
	dirs, _ := os.ReadDir(out)
	for _, d := range dirs {
		keys, _ := os.ReadDir(filepath.Join(out, d.Name()))
		secrets[d.Name()] = map[string][]byte{}
		for _, k := range keys {
			v, err := os.ReadFile(filepath.Join(out, d.Name(), k.Name()))
			if err != nil {
				t.Fatal(err)
			}
			secrets[d.Name()][k.Name()] = v
		}
	}
	return secrets
}

// cluster is what the pods share: the binary, the Secrets, the volumes.
type cluster struct {
	t       *testing.T
	bin     string
	secrets map[string]map[string][]byte
	claims  map[string]string // PersistentVolumeClaim (or claim template) name → directory
	hosts   string            // the pods' /etc/hosts: receiver is 127.0.0.1
	peers   int               // pods that reached a Service: each gets an address of its own
	mu      sync.Mutex
}

// pod is a network (and mount) namespace, held by a sleeping process.
type pod struct {
	name   string
	holder *exec.Cmd
	netns  string
	peer   net.IP // the address its connections come from, as seen by a Service's pods
}

func (c *cluster) pod(name string) *pod {
	t := c.t
	t.Helper()
	cmd := exec.Command("unshare", "--net", "--mount", "--propagation", "private", "--",
		"sh", "-c", `ip link set lo up && mount --bind "$1" /etc/hosts && echo up && exec sleep 900`, "sh", c.hosts)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "up\n" {
		t.Fatalf("pod %s: its namespaces: %q", name, line)
	}
	c.mu.Lock()
	c.peers++
	peer := net.IPv4(127, 0, 1, byte(c.peers))
	c.mu.Unlock()
	return &pod{name: name, holder: cmd, netns: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), peer: peer}
}

// dial connects from inside p's namespace.
func (p *pod) dial(ctx context.Context, addr string, from net.IP) (net.Conn, error) {
	var c net.Conn
	var err error
	d := net.Dialer{}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	if nerr := netnstest.Do(p.netns, func() { c, err = d.DialContext(ctx, "tcp", addr) }); nerr != nil {
		return nil, nerr
	}
	return c, err
}

// http is a client whose connections start in p's namespace.
func (p *pod) http() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return p.dial(ctx, addr, nil) }}}
}

// service stands in, inside pod from, for Service port port: it listens
// there on 127.0.0.1 (where /etc/hosts puts the Service's name) and
// forwards to target's targetPort, from an address of from's own, as a
// ClusterIP does.
func (c *cluster) service(from, target *pod, port, targetPort int) {
	t := c.t
	var ln net.Listener
	var err error
	if nerr := netnstest.Do(from.netns, func() { ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)) }); nerr != nil || err != nil {
		t.Fatalf("pod %s: Service port %d: %v %v", from.name, port, nerr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := target.dial(context.Background(), "127.0.0.1:"+strconv.Itoa(targetPort), from.peer)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { io.Copy(out, in); out.(*net.TCPConn).CloseWrite() }()
				io.Copy(in, out)
			}()
		}
	}()
}

// container is one container of a pod as the kubelet would start it.
type container struct {
	pod    *pod
	argv   []string
	env    []string
	stderr *syncBuffer
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
}

// volumes makes a directory for each volume of spec: a Secret's keys as
// files with the volume's modes, a claim's directory.
func (c *cluster) volumes(spec corev1.PodSpec, owner string) map[string]string {
	t := c.t
	t.Helper()
	dirs := map[string]string{}
	for name, dir := range c.claims {
		dirs[name] = dir // a StatefulSet's volumeClaimTemplates, by their name
	}
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil:
			s, ok := c.secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("%s: volume %s: Secret %s is not made by README.md's lines", owner, v.Name, v.Secret.SecretName)
			}
			dir := t.TempDir()
			mode := os.FileMode(0o644)
			if m := v.Secret.DefaultMode; m != nil {
				mode = os.FileMode(*m)
			}
			write := func(key, path string, m *int32) {
				val, ok := s[key]
				if !ok {
					t.Fatalf("%s: volume %s: Secret %s has no key %s", owner, v.Name, v.Secret.SecretName, key)
				}
				fm := mode
				if m != nil {
					fm = os.FileMode(*m)
				}
				p := filepath.Join(dir, path)
				if err := os.WriteFile(p, val, fm); err != nil {
					t.Fatal(err)
				}
				os.Chmod(p, fm)
			}
			if len(v.Secret.Items) > 0 {
				for _, it := range v.Secret.Items {
					write(it.Key, it.Path, it.Mode)
				}
			} else {
				for k := range s {
					write(k, k, nil)
				}
			}
			dirs[v.Name] = dir
		case v.PersistentVolumeClaim != nil:
			dir, ok := c.claims[v.PersistentVolumeClaim.ClaimName]
			if !ok {
				t.Fatalf("%s: volume %s: claim %s is none of this test's", owner, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
			dirs[v.Name] = dir
		default:
			t.Fatalf("%s: volume %s: a kind this test does not stand in for", owner, v.Name)
		}
	}
	return dirs
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand does the kubelet's $(VAR) expansion: a defined VAR is replaced,
// $$ is $, anything else is left as it is.
func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// start starts container ct of spec in p, with the variables the
// controller adds (the Job's completion index).
// hook, if not nil, is called with stderr so far at each write to it.
func (c *cluster) start(p *pod, spec corev1.PodSpec, ct corev1.Container, owner string, added map[string]string, hook func(string)) *container {
	t := c.t
	t.Helper()
	dirs := c.volumes(spec, owner)
	type mount struct{ path, dir string }
	var mounts []mount
	for _, m := range ct.VolumeMounts {
		dir, ok := dirs[m.Name]
		if !ok {
			t.Fatalf("%s: container %s mounts %s, which is no volume", owner, ct.Name, m.Name)
		}
		if m.SubPath != "" {
			t.Fatalf("%s: subPath is not stood in for", owner)
		}
		mounts = append(mounts, mount{strings.TrimSuffix(m.MountPath, "/"), dir})
	}
	slices.SortFunc(mounts, func(a, b mount) int { return len(b.path) - len(a.path) })
	// A path in a mounted volume, alone or as NAME=PATH, is the volume's
	// directory here.
	local := func(arg string) string {
		prefix, p := "", arg
		if k, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(v, "/") {
			prefix, p = k+"=", v
		}
		for _, m := range mounts {
			if p == m.path || strings.HasPrefix(p, m.path+"/") {
				return prefix + m.dir + p[len(m.path):]
			}
		}
		return arg
	}
	vars := map[string]string{}
	for k, v := range added {
		vars[k] = v
	}
	// What the container runtime sets: PATH, HOSTNAME, and HOME from the
	// image's passwd (root's, a directory of the pod's writable layer).
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOSTNAME=" + p.name, "HOME=" + t.TempDir()}
	for _, e := range ct.Env {
		val := expand(e.Value, vars)
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				t.Fatalf("%s: env %s: only secretKeyRef is stood in for", owner, e.Name)
			}
			v, ok := c.secrets[ref.Name][ref.Key]
			if !ok {
				t.Fatalf("%s: env %s: Secret %s has no key %s (README.md's lines make it)", owner, e.Name, ref.Name, ref.Key)
			}
			val = string(v)
		}
		vars[e.Name] = val
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	var argv []string
	for _, a := range append(slices.Clone(ct.Command), ct.Args...) {
		argv = append(argv, local(expand(a, vars)))
	}
	if argv[0] != "/usr/local/bin/bulkmove" {
		t.Fatalf("%s: command %s, the image's binary is /usr/local/bin/bulkmove", owner, argv[0])
	}
	argv[0] = c.bin
	x := &container{pod: p, argv: argv, env: env, stderr: &syncBuffer{hook: hook}, done: make(chan struct{})}
	x.cmd = exec.Command("nsenter", append([]string{"--target", strconv.Itoa(p.holder.Process.Pid), "--net", "--mount", "--"}, argv...)...)
	x.cmd.Env = env
	x.cmd.Stdout, x.cmd.Stderr = x.stderr, x.stderr
	if err := x.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { x.err = x.cmd.Wait(); close(x.done) }()
	t.Cleanup(func() { x.cmd.Process.Kill(); <-x.done })
	return x
}

// waitLog waits for a line of stderr that matches re, and returns it.
func (x *container) waitLog(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(x.stderr.String()); m != nil {
			return m
		}
		select {
		case <-x.done:
			if m := re.FindStringSubmatch(x.stderr.String()); m != nil {
				return m
			}
			t.Fatalf("%s exited (%v) before saying %s:\n%s", x.pod.name, x.err, re, x.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not say %s in 30 s:\n%s", x.pod.name, re, x.stderr)
	return nil
}

// succeeds waits for the container to exit 0.
func (x *container) succeeds(t *testing.T) {
	t.Helper()
	select {
	case <-x.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s still runs after 3 minutes:\n%s", x.pod.name, x.stderr)
	}
	if x.err != nil {
		t.Fatalf("%s: %v (%s)\n%s", x.pod.name, x.err, strings.Join(x.argv, " "), x.stderr)
	}
}

type syncBuffer struct {
	mu   sync.Mutex
	b    strings.Builder
	hook func(string)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if s.hook != nil {
		s.hook(s.b.String())
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// put sends PUT /bwlimit with body to the pod's port, with the token (none
// if empty), and returns the status.
func put(t *testing.T, p *pod, port int32, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://127.0.0.1:%d/bwlimit", port), strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := p.http().Do(req)
	if err != nil {
		t.Fatalf("%s: PUT /bwlimit: %v", p.name, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// wrongToken has the form of a real one.
const wrongToken = "5f0c2b8e9d41a7763e12c9b0f4a8d6e1c3b7a9f2e5d8c1b4"

// checkControl tries the control endpoint on port: without a token and
// with a wrong one it must refuse (401), with the right one take the new
// limit (200).
func checkControl(t *testing.T, p *pod, port int32, token string) {
	t.Helper()
	for _, c := range []struct {
		what, token string
		want        int
	}{{"no token", "", http.StatusUnauthorized}, {"a wrong token", wrongToken, http.StatusUnauthorized}, {"the control token", token, http.StatusOK}} {
		if got := put(t, p, port, c.token, "1G"); got != c.want {
			t.Errorf("%s: PUT /bwlimit on port %d with %s: %d, want %d", p.name, port, c.what, got, c.want)
		}
	}
}

// metricsPort is the container port named metrics.
func metricsPort(t *testing.T, ct corev1.Container, owner string) int32 {
	for _, p := range ct.Ports {
		if p.Name == "metrics" {
			return p.ContainerPort
		}
	}
	t.Fatalf("%s: no port named metrics", owner)
	return 0
}

// controlToken is the file --control-token names in ct's arguments, as a
// Secret's key: the volume mounted there and the item's key.
func controlToken(t *testing.T, spec corev1.PodSpec, ct corev1.Container, secrets map[string]map[string][]byte, owner string) string {
	t.Helper()
	i := slices.Index(ct.Args, "--control-token")
	if i < 0 || i+1 >= len(ct.Args) {
		t.Fatalf("%s: no --control-token: its metrics port, on the pod's address, would take PUT /bwlimit from anyone", owner)
	}
	file := ct.Args[i+1]
	for _, m := range ct.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			key := rel
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					key = it.Key
				}
			}
			return strings.TrimSpace(string(secrets[v.Secret.SecretName][key]))
		}
	}
	t.Fatalf("%s: --control-token %s is in no Secret's volume", owner, file)
	return ""
}

// TestManifestsRun runs the receiver, every index of the Indexed Job and
// the final pass by their command lines, args and env in the manifests
// (the kustomization built), with the Secrets README.md makes: the Job
// must connect as shipped and, with the final pass, copy a tree exactly;
// each sender's control endpoint must take the control token only, and
// the receiver's metrics port must take no write.
func TestManifestsRun(t *testing.T) {
	need(t)
	objs := built(t)
	sts, _ := objs["StatefulSet/bulkmove-receiver"].(*appsv1.StatefulSet)
	svc, _ := objs["Service/receiver"].(*corev1.Service)
	job, _ := objs["Job/bulkmove-sender"].(*batchv1.Job)
	final, _ := readDoc(t, "final-pass.yaml").(*batchv1.Job)
	if sts == nil || svc == nil || job == nil || final == nil {
		t.Fatal("the kustomization lacks the receiver, its Service or the Job, or final-pass.yaml its Job")
	}

	secrets := readmeSecrets(t)
	hosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hosts, []byte("127.0.0.1 localhost\n127.0.0.1 "+svc.Name+"\n"), 0o644)
	src, dst := t.TempDir(), t.TempDir()
	if err := gentree.Mixed(filepath.Join(src, "data"), 400, 7); err != nil {
		t.Fatal(err)
	}
	// Owners other than root's, which the receiver keeps (--allow-owner).
	n := 0
	filepath.WalkDir(filepath.Join(src, "data"), func(p string, d os.DirEntry, err error) error {
		if err == nil && n%3 == 0 {
			os.Lchown(p, 1000+n%5, 2000+n%7)
		}
		n++
		return nil
	})
	claims := map[string]string{"bulkmove-source": src}
	for _, ct := range sts.Spec.VolumeClaimTemplates {
		claims[ct.Name] = dst
	}
	c := &cluster{t: t, bin: testbin.Build(t), secrets: secrets, claims: claims, hosts: hosts}

	// The receiver.
	rpod := c.pod("bulkmove-receiver-0")
	rspec := sts.Spec.Template.Spec
	recv := c.start(rpod, rspec, rspec.Containers[0], "StatefulSet/"+sts.Name, nil, nil)
	m := recv.waitLog(t, regexp.MustCompile(`certificate SHA-256 ([0-9a-f]{64})`))
	if want := strings.TrimSpace(string(secrets["bulkmove-token"]["fingerprint"])); m[1] != want {
		t.Errorf("the receiver's certificate has SHA-256 %s; the fingerprint in Secret bulkmove-token is %q", m[1], want)
	}
	recv.waitLog(t, regexp.MustCompile(`metrics on http://`))
	rport := metricsPort(t, rspec.Containers[0], "StatefulSet/"+sts.Name)
	for _, tok := range []string{"", wrongToken, string(secrets["bulkmove-token"]["token"])} {
		if got := put(t, rpod, rport, tok, "1"); got != http.StatusNotFound {
			t.Errorf("the receiver's metrics port: PUT /bwlimit: %d, want 404 (serve has no control endpoint)", got)
		}
	}

	// The Service's ports, by name or number, onto the receiver's.
	targetPort := func(port int) int {
		for _, sp := range svc.Spec.Ports {
			if int(sp.Port) != port {
				continue
			}
			if sp.TargetPort.IntValue() != 0 {
				return sp.TargetPort.IntValue()
			}
			for _, cp := range rspec.Containers[0].Ports {
				if cp.Name == sp.TargetPort.StrVal {
					return int(cp.ContainerPort)
				}
			}
		}
		t.Fatalf("Service %s has no port %d for the receiver's", svc.Name, port)
		return 0
	}
	destPort := func(ct corev1.Container) int {
		for _, a := range ct.Args {
			if rest, ok := strings.CutPrefix(a, "bulkmove://"+svc.Name+":"); ok {
				p, _ := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
				return p
			}
		}
		t.Fatalf("container %s sends to no bulkmove://%s:PORT/", ct.Name, svc.Name)
		return 0
	}

	// runSender starts a sender pod. With check, it tries the pod's
	// control endpoint while the sender runs: a sender listens for
	// metrics once its streams are connected, and says so on stderr; at
	// that line the receiver is stopped (SIGSTOP), so the sender waits for
	// it with its listener open, until the checks are done.
	runSender := func(j *batchv1.Job, name string, added map[string]string, check bool) *container {
		p := c.pod(name)
		spec := j.Spec.Template.Spec
		ct := spec.Containers[0]
		port := destPort(ct)
		c.service(p, rpod, port, targetPort(port))
		if !check {
			return c.start(p, spec, ct, "Job/"+j.Name, added, nil)
		}
		var once sync.Once
		stop := func(log string) {
			if strings.Contains(log, "metrics on http://") {
				once.Do(func() { recv.cmd.Process.Signal(syscall.SIGSTOP) })
			}
		}
		defer recv.cmd.Process.Signal(syscall.SIGCONT)
		x := c.start(p, spec, ct, "Job/"+j.Name, added, stop)
		x.waitLog(t, regexp.MustCompile(`metrics on http://`))
		select {
		case <-x.done:
			t.Fatalf("%s ended before its control endpoint could be tried:\n%s", name, x.stderr)
		default:
		}
		checkControl(t, p, metricsPort(t, ct, "Job/"+j.Name), controlToken(t, spec, ct, secrets, "Job/"+j.Name))
		return x
	}

	if job.Spec.CompletionMode == nil || *job.Spec.CompletionMode != batchv1.IndexedCompletion || job.Spec.Completions == nil {
		t.Fatal("Job bulkmove-sender is not Indexed with completions")
	}
	runSender(job, job.Name+"-0", map[string]string{"JOB_COMPLETION_INDEX": "0"}, true).succeeds(t)
	var rest []*container
	for i := 1; i < int(*job.Spec.Completions); i++ {
		rest = append(rest, runSender(job, fmt.Sprintf("%s-%d", job.Name, i), map[string]string{"JOB_COMPLETION_INDEX": strconv.Itoa(i)}, false))
	}
	for _, x := range rest {
		x.succeeds(t)
	}
	// What the source no longer has, for the final pass to delete. (SRC's
	// contents land in DEST: data/ is the root "data", the volume.)
	if err := os.WriteFile(filepath.Join(dst, "gone-from-the-source"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	runSender(final, final.Name, nil, true).succeeds(t)
	treecmp.Equal(t, filepath.Join(src, "data"), dst, treecmp.Options{Owner: true})
}
