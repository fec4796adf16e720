package deploy_test

// The Kubernetes manifests in kubernetes/ are checked offline: no cluster
// and no schema download (CI has no network for one). Every YAML document
// is parsed, and what a typo would break at apply time, or silently at run
// time, is checked by hand: the required fields, the Indexed Job's N, the
// names that one object gives another, and the monitors' selectors.

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const kubeDir = "kubernetes"

// kobj is what the checks read of a Kubernetes object; the rest of each
// document is kept in raw.
type kobj struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	file string
	raw  map[string]any
}

type podTemplate struct {
	Metadata struct {
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		RestartPolicy string `yaml:"restartPolicy"`
		Containers    []struct {
			Name    string   `yaml:"name"`
			Image   string   `yaml:"image"`
			Command []string `yaml:"command"`
			Args    []string `yaml:"args"`
			Ports   []struct {
				Name          string `yaml:"name"`
				ContainerPort int    `yaml:"containerPort"`
			} `yaml:"ports"`
			VolumeMounts []struct {
				Name      string `yaml:"name"`
				MountPath string `yaml:"mountPath"`
			} `yaml:"volumeMounts"`
		} `yaml:"containers"`
		Volumes []struct {
			Name   string `yaml:"name"`
			Secret *struct {
				SecretName string `yaml:"secretName"`
			} `yaml:"secret"`
			PVC *struct {
				ClaimName string `yaml:"claimName"`
			} `yaml:"persistentVolumeClaim"`
		} `yaml:"volumes"`
	} `yaml:"spec"`
}

type jobSpec struct {
	CompletionMode string      `yaml:"completionMode"`
	Completions    *int        `yaml:"completions"`
	Parallelism    *int        `yaml:"parallelism"`
	Template       podTemplate `yaml:"template"`
}

type statefulSetSpec struct {
	ServiceName string `yaml:"serviceName"`
	Replicas    *int   `yaml:"replicas"`
	Selector    struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template             podTemplate `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	} `yaml:"volumeClaimTemplates"`
}

type serviceSpec struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort any    `yaml:"targetPort"`
	} `yaml:"ports"`
}

type labelSelector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `yaml:"key"`
		Operator string   `yaml:"operator"`
		Values   []string `yaml:"values"`
	} `yaml:"matchExpressions"`
}

// matches reports whether the selector selects labels (In, NotIn, Exists
// and DoesNotExist, as Kubernetes' label selectors); an empty selector is
// an error here, as it would select everything.
func (s labelSelector) matches(t *testing.T, labels map[string]string) bool {
	t.Helper()
	if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		t.Error("an empty selector selects everything")
		return false
	}
	for k, v := range s.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		v, ok := labels[e.Key]
		switch e.Operator {
		case "In":
			if !ok || !slices.Contains(e.Values, v) {
				return false
			}
		case "NotIn":
			if ok && slices.Contains(e.Values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			t.Errorf("unknown selector operator %q", e.Operator)
			return false
		}
	}
	return true
}

type monitorSpec struct {
	Selector  labelSelector `yaml:"selector"`
	Endpoints []struct {
		Port string `yaml:"port"`
	} `yaml:"endpoints"`
	PodMetricsEndpoints []struct {
		Port string `yaml:"port"`
	} `yaml:"podMetricsEndpoints"`
}

// spec decodes o's spec into v.
func spec[T any](t *testing.T, o kobj) T {
	t.Helper()
	var v T
	b, err := yaml.Marshal(o.raw["spec"])
	if err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Metadata.Name, err)
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s %s: spec: %v", o.Kind, o.Metadata.Name, err)
	}
	return v
}

// loadManifests parses every document of every YAML file in kubernetes/.
func loadManifests(t *testing.T) []kobj {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", kubeDir, err)
	}
	var objs []kobj
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var raw map[string]any
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			if raw == nil {
				continue // an empty document
			}
			var o kobj
			b, _ := yaml.Marshal(raw)
			if err := yaml.Unmarshal(b, &o); err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			o.file, o.raw = f, raw
			objs = append(objs, o)
		}
	}
	return objs
}

var createSecret = regexp.MustCompile(`kubectl create secret (?:generic|tls) ([a-z0-9-]+)`)

// readmeSecrets returns the names of the Secrets kubernetes/README.md
// makes with kubectl create secret.
func readmeSecrets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kubeDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]bool{}
	for _, m := range createSecret.FindAllStringSubmatch(string(b), -1) {
		made[m[1]] = true
	}
	return made
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// TestKubernetesManifests checks the manifests in kubernetes/ offline.
func TestKubernetesManifests(t *testing.T) {
	objs := loadManifests(t)
	byKind := map[string][]kobj{}
	names := map[string]bool{}
	for _, o := range objs {
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Errorf("%s: a document lacks apiVersion, kind or metadata.name: %q %q %q", o.file, o.APIVersion, o.Kind, o.Metadata.Name)
			continue
		}
		if !dnsLabel.MatchString(o.Metadata.Name) || len(o.Metadata.Name) > 63 {
			t.Errorf("%s: %s name %q is not a DNS label", o.file, o.Kind, o.Metadata.Name)
		}
		key := o.Kind + "/" + o.Metadata.Name
		if names[key] {
			t.Errorf("%s: %s defined twice", o.file, key)
		}
		names[key] = true
		want := map[string]string{
			"Secret": "v1", "Service": "v1", "Job": "batch/v1", "StatefulSet": "apps/v1", "Deployment": "apps/v1",
			"ServiceMonitor": "monitoring.coreos.com/v1", "PodMonitor": "monitoring.coreos.com/v1",
			"Kustomization": "kustomize.config.k8s.io/v1beta1",
		}[o.Kind]
		if want == "" {
			t.Errorf("%s: unexpected kind %s", o.file, o.Kind)
		} else if o.APIVersion != want {
			t.Errorf("%s: %s has apiVersion %s, want %s", o.file, key, o.APIVersion, want)
		}
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	if len(byKind["Secret"]) > 0 {
		t.Errorf("%s: a Secret in a file: the Secrets are made with kubectl create secret (README.md), and applying a file would replace them", byKind["Secret"][0].file)
	}
	made := readmeSecrets(t)
	for _, k := range []string{"Service", "Job", "StatefulSet", "ServiceMonitor", "Kustomization"} {
		if len(byKind[k]) == 0 {
			t.Errorf("no %s in %s", k, kubeDir)
		}
	}

	// The workloads' pod templates: containers and the names they use.
	type workload struct {
		owner string
		pt    podTemplate
	}
	var templates []workload
	for _, o := range byKind["StatefulSet"] {
		s := spec[statefulSetSpec](t, o)
		templates = append(templates, workload{"StatefulSet/" + o.Metadata.Name, s.Template})
		if s.Replicas == nil || *s.Replicas < 1 {
			t.Errorf("StatefulSet %s: no replicas", o.Metadata.Name)
		}
		sel := labelSelector{MatchLabels: s.Selector.MatchLabels}
		if !sel.matches(t, s.Template.Metadata.Labels) {
			t.Errorf("StatefulSet %s: its selector %v does not select its pods %v", o.Metadata.Name, s.Selector.MatchLabels, s.Template.Metadata.Labels)
		}
		if !names["Service/"+s.ServiceName] {
			t.Errorf("StatefulSet %s: serviceName %q is no Service here", o.Metadata.Name, s.ServiceName)
		}
	}
	for _, o := range byKind["Job"] {
		s := spec[jobSpec](t, o)
		templates = append(templates, workload{"Job/" + o.Metadata.Name, s.Template})
		if r := s.Template.Spec.RestartPolicy; r != "Never" && r != "OnFailure" {
			t.Errorf("Job %s: restartPolicy %q", o.Metadata.Name, r)
		}
	}
	for _, tp := range templates {
		spec := tp.pt.Spec
		if len(spec.Containers) == 0 {
			t.Errorf("%s: no containers", tp.owner)
		}
		vols := map[string]bool{}
		for _, v := range spec.Volumes {
			vols[v.Name] = true
			if v.Secret != nil && !made[v.Secret.SecretName] {
				t.Errorf("%s: volume %s names Secret %q, which README.md's kubectl create secret lines do not make", tp.owner, v.Name, v.Secret.SecretName)
			}
		}
		for _, c := range spec.Containers {
			if c.Image == "" || len(c.Command) == 0 || len(c.Args) == 0 {
				t.Errorf("%s: container %q lacks an image, a command or args", tp.owner, c.Name)
			}
			for _, m := range c.VolumeMounts {
				if !vols[m.Name] && !claimTemplate(t, byKind, tp.owner, m.Name) {
					t.Errorf("%s: container %q mounts %q, which is no volume", tp.owner, c.Name, m.Name)
				}
			}
			for i, a := range c.Args {
				// --token-file must point into a mounted volume.
				if a == "--token-file" && i+1 < len(c.Args) && !mountedAt(c.VolumeMounts, c.Args[i+1]) {
					t.Errorf("%s: --token-file %s is not in a mounted volume", tp.owner, c.Args[i+1])
				}
				// bulkmove://HOST:PORT/...: HOST is a Service here.
				if rest, ok := strings.CutPrefix(a, "bulkmove://"); ok {
					host, _, _ := strings.Cut(rest, "/")
					svc, port, _ := strings.Cut(host, ":")
					if !names["Service/"+svc] {
						t.Errorf("%s: %s names Service %q, which is not defined here", tp.owner, a, svc)
					} else if !servicePort(t, byKind, svc, port) {
						t.Errorf("%s: Service %s has no port %s", tp.owner, svc, port)
					}
				}
			}
		}
		if a := tp.pt.Metadata.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] == "" {
			t.Errorf("%s: no prometheus.io/scrape and prometheus.io/port annotations", tp.owner)
		}
	}

	// The Indexed Job: completions == parallelism == N of --shard.
	indexed := 0
	for _, o := range byKind["Job"] {
		s := spec[jobSpec](t, o)
		if s.CompletionMode != "Indexed" {
			continue
		}
		indexed++
		if s.Completions == nil || s.Parallelism == nil {
			t.Errorf("Job %s: Indexed without completions or parallelism", o.Metadata.Name)
			continue
		}
		if *s.Completions != *s.Parallelism || *s.Completions < 1 {
			t.Errorf("Job %s: completions %d and parallelism %d must be equal", o.Metadata.Name, *s.Completions, *s.Parallelism)
			continue
		}
		n := *s.Completions
		found := false
		for _, c := range s.Template.Spec.Containers {
			for i, a := range c.Args {
				if a != "--shard" || i+1 >= len(c.Args) {
					continue
				}
				found = true
				idx, count, _ := strings.Cut(c.Args[i+1], "/")
				if idx != "$(JOB_COMPLETION_INDEX)" {
					t.Errorf("Job %s: --shard %s does not use $(JOB_COMPLETION_INDEX)", o.Metadata.Name, c.Args[i+1])
				}
				if k, err := strconv.Atoi(count); err != nil || k != n {
					t.Errorf("Job %s: --shard %s, but completions = parallelism = %d", o.Metadata.Name, c.Args[i+1], n)
				}
			}
		}
		if !found {
			t.Errorf("Job %s: Indexed, but no container runs --shard", o.Metadata.Name)
		}
	}
	if indexed != 1 {
		t.Errorf("%d Indexed Jobs, want 1", indexed)
	}

	// Services select pods, monitors select Services and pods.
	for _, o := range byKind["Service"] {
		s := spec[serviceSpec](t, o)
		sel := labelSelector{MatchLabels: s.Selector}
		hit := false
		for _, tp := range templates {
			if len(s.Selector) > 0 && sel.matches(t, tp.pt.Metadata.Labels) {
				hit = true
			}
		}
		if !hit {
			t.Errorf("Service %s selects no pods of these workloads (%v)", o.Metadata.Name, s.Selector)
		}
	}
	for _, o := range byKind["ServiceMonitor"] {
		s := spec[monitorSpec](t, o)
		var hit []string
		for _, svc := range byKind["Service"] {
			if s.Selector.matches(t, svc.Metadata.Labels) {
				hit = append(hit, svc.Metadata.Name)
				for _, ep := range s.Endpoints {
					if !servicePort(t, byKind, svc.Metadata.Name, ep.Port) {
						t.Errorf("ServiceMonitor %s: Service %s has no port %q", o.Metadata.Name, svc.Metadata.Name, ep.Port)
					}
				}
			}
		}
		if len(hit) == 0 {
			t.Errorf("ServiceMonitor %s selects no Service's labels", o.Metadata.Name)
		}
		if len(s.Endpoints) == 0 {
			t.Errorf("ServiceMonitor %s: no endpoints", o.Metadata.Name)
		}
	}
	for _, o := range byKind["PodMonitor"] {
		s := spec[monitorSpec](t, o)
		for _, tp := range templates {
			if !s.Selector.matches(t, tp.pt.Metadata.Labels) {
				continue
			}
			if strings.HasPrefix(tp.owner, "StatefulSet/") {
				t.Errorf("PodMonitor %s selects %s, which its ServiceMonitor scrapes already", o.Metadata.Name, tp.owner)
			}
			for _, ep := range s.PodMetricsEndpoints {
				if !containerPort(tp.pt, ep.Port) {
					t.Errorf("PodMonitor %s: %s has no port %q", o.Metadata.Name, tp.owner, ep.Port)
				}
			}
		}
	}

	// The Kustomization lists files that exist.
	for _, o := range byKind["Kustomization"] {
		res, _ := o.raw["resources"].([]any)
		if len(res) == 0 {
			t.Errorf("Kustomization %s: no resources", o.Metadata.Name)
		}
		for _, r := range res {
			if _, err := os.Stat(filepath.Join(kubeDir, r.(string))); err != nil {
				t.Errorf("Kustomization %s: %v", o.Metadata.Name, err)
			}
		}
	}
}

func mountedAt(mounts []struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}, file string) bool {
	for _, m := range mounts {
		if strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return true
		}
	}
	return false
}

// claimTemplate reports whether owner (a StatefulSet) has a volume claim
// template of that name.
func claimTemplate(t *testing.T, byKind map[string][]kobj, owner, name string) bool {
	for _, o := range byKind["StatefulSet"] {
		if "StatefulSet/"+o.Metadata.Name != owner {
			continue
		}
		for _, c := range spec[statefulSetSpec](t, o).VolumeClaimTemplates {
			if c.Metadata.Name == name {
				return true
			}
		}
	}
	return false
}

// servicePort reports whether Service svc has a port of that name or number.
func servicePort(t *testing.T, byKind map[string][]kobj, svc, port string) bool {
	for _, o := range byKind["Service"] {
		if o.Metadata.Name != svc {
			continue
		}
		for _, p := range spec[serviceSpec](t, o).Ports {
			if p.Name == port || strconv.Itoa(p.Port) == port {
				return true
			}
		}
	}
	return false
}

func containerPort(pt podTemplate, port string) bool {
	for _, c := range pt.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port || strconv.Itoa(p.ContainerPort) == port {
				return true
			}
		}
	}
	return false
}

// TestDockerfile: the image the manifests run is built by a multi-stage
// Dockerfile into a static binary on a minimal base, at the path their
// command names.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"AS build", "CGO_ENABLED=0", "./cmd/bulkmove", "FROM gcr.io/distroless/static", "COPY --from=build /out/bulkmove /usr/local/bin/bulkmove"} {
		if !strings.Contains(s, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	for _, o := range loadManifests(t) {
		if o.Kind != "Job" && o.Kind != "StatefulSet" {
			continue
		}
		var pt podTemplate
		switch o.Kind {
		case "Job":
			pt = spec[jobSpec](t, o).Template
		default:
			pt = spec[statefulSetSpec](t, o).Template
		}
		for _, c := range pt.Spec.Containers {
			if len(c.Command) == 0 || c.Command[0] != "/usr/local/bin/bulkmove" {
				t.Errorf("%s %s: command %v, the image has /usr/local/bin/bulkmove", o.Kind, o.Metadata.Name, c.Command)
			}
		}
	}
}
