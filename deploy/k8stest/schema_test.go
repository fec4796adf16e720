package k8stest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kubeDir holds the shipped manifests.
const kubeDir = "../kubernetes"

// kinds are the objects the manifests may hold: the apiVersion each must
// have and the Go type it decodes into.
var kinds = map[string]struct {
	apiVersion string
	new        func() any
}{
	"StatefulSet":    {"apps/v1", func() any { return new(appsv1.StatefulSet) }},
	"Job":            {"batch/v1", func() any { return new(batchv1.Job) }},
	"Service":        {"v1", func() any { return new(corev1.Service) }},
	"Secret":         {"v1", func() any { return new(corev1.Secret) }},
	"ServiceMonitor": {"monitoring.coreos.com/v1", func() any { return new(monitoringv1.ServiceMonitor) }},
	"PodMonitor":     {"monitoring.coreos.com/v1", func() any { return new(monitoringv1.PodMonitor) }},
	"Kustomization":  {"kustomize.config.k8s.io/v1beta1", func() any { return new(kusttypes.Kustomization) }},
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes one YAML document into the type of its kind,
// refusing a field that type does not have (a typo, or a field at the
// wrong level) and a value of the wrong type, as the API server would.
func decodeStrict(t *testing.T, where string, doc []byte) (kind, name string, obj any) {
	t.Helper()
	var tm struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	k, ok := kinds[tm.Kind]
	if !ok {
		t.Fatalf("%s: kind %q is none of those this test knows", where, tm.Kind)
	}
	if tm.APIVersion != k.apiVersion {
		t.Errorf("%s: %s %s has apiVersion %q, want %q", where, tm.Kind, tm.Metadata.Name, tm.APIVersion, k.apiVersion)
	}
	obj = k.new()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Errorf("%s: %s %s: %v", where, tm.Kind, tm.Metadata.Name, err)
	}
	return tm.Kind, tm.Metadata.Name, obj
}

// TestManifestsStrict decodes every document of every file in
// deploy/kubernetes strictly into the Kubernetes API types (and the
// Prometheus Operator's, and kustomize's for the kustomization).
func TestManifestsStrict(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", kubeDir, err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSep.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			kind, name, _ := decodeStrict(t, filepath.Base(f)+" document "+strconv.Itoa(i+1), []byte(doc))
			seen[kind] = true
			if kind == "Secret" {
				t.Errorf("%s: Secret %s: the Secrets are made with kubectl create secret (README.md), a file here would be applied over them", f, name)
			}
		}
	}
	for _, k := range []string{"StatefulSet", "Job", "Service", "ServiceMonitor", "PodMonitor", "Kustomization"} {
		if !seen[k] {
			t.Errorf("no %s in %s", k, kubeDir)
		}
	}
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// build runs kustomize on deploy/kubernetes, as kubectl apply -k does.
func build(t *testing.T) resmap.ResMap {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kubeDir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", kubeDir, err)
	}
	return m
}

// built decodes, strictly, what the kustomization makes: kind/name → object.
func built(t *testing.T) map[string]any {
	t.Helper()
	objs := map[string]any{}
	for _, r := range build(t).Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind, name, obj := decodeStrict(t, "kustomize build", y)
		objs[kind+"/"+name] = obj
	}
	return objs
}

// TestKustomizeBuild: the kustomization builds, makes the receiver, its
// Service, the monitors and the senders' Job, and no Secret: `kubectl
// apply -k` after `kubectl create secret` must leave the real tokens.
func TestKustomizeBuild(t *testing.T) {
	objs := built(t)
	for _, want := range []string{"StatefulSet/bulkmove-receiver", "Service/receiver", "Job/bulkmove-sender", "ServiceMonitor/bulkmove-receiver", "PodMonitor/bulkmove-sender"} {
		if objs[want] == nil {
			t.Errorf("kustomize build makes no %s", want)
		}
	}
	for k := range objs {
		if strings.HasPrefix(k, "Secret/") {
			t.Errorf("kustomize build makes %s: applying it would replace the Secret made by kubectl create secret", k)
		}
	}
	if objs["Job/bulkmove-final-pass"] != nil {
		t.Error("the final pass is in the kustomization: it would run with the shards, not after them")
	}
}

// readDoc decodes the one document of a manifest file strictly.
func readDoc(t *testing.T, file string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kubeDir, file))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(docSep.FindAllIndex(bytes.TrimSpace(b), -1)); n != 0 {
		t.Fatalf("%s: %d documents, want 1", file, n+1)
	}
	_, _, obj := decodeStrict(t, file, b)
	return obj
}
