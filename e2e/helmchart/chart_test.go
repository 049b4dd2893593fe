// Package helmchart checks that the Helm chart deploy/helm/tally renders the
// objects of deploy/: helm template against kubectl kustomize, object by
// object. It needs helm and kubectl in TALLY_TOOLS (make helm-check builds
// them) and skips itself otherwise.
package helmchart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// helmLabels are the labels the chart adds that deploy/ has not.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by"}

// release is the release name and namespace of every render: deploy/'s
// namespace.
const (
	release   = "tally"
	namespace = "tally-system"
)

type object = map[string]any

// root is the repository's root, from this package's directory, where
// the test runs.
func root(t *testing.T) string {
	return filepath.Join("..", "..")
}

// tools returns the paths of helm and kubectl in TALLY_TOOLS, or skips.
func tools(t *testing.T) (helm, kubectl string) {
	t.Helper()
	dir := os.Getenv("TALLY_TOOLS")
	if dir == "" {
		t.Skip("TALLY_TOOLS is not set (make helm-check sets it)")
	}
	helm, kubectl = filepath.Join(dir, "helm"), filepath.Join(dir, "kubectl")
	for _, b := range []string{helm, kubectl} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("TALLY_TOOLS=%s has no %s (make helm-check builds it)", dir, filepath.Base(b))
		}
	}
	return helm, kubectl
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// parse decodes a multi-document YAML stream, skipping empty documents.
func parse(t *testing.T, data []byte) []object {
	t.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []object
	for {
		var o object
		err := d.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("parsing rendered YAML: %v\n%s", err, data)
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}

func key(o object) string {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	kind, _ := o["kind"].(string)
	return fmt.Sprintf("%s %s/%s", kind, ns, name)
}

// index keys the objects by kind, namespace and name, dropping Helm's own
// labels (and a labels map they leave empty).
func index(t *testing.T, objs []object) map[string]object {
	t.Helper()
	m := map[string]object{}
	for _, o := range objs {
		if md, ok := o["metadata"].(map[string]any); ok {
			if labels, ok := md["labels"].(map[string]any); ok {
				for _, l := range helmLabels {
					delete(labels, l)
				}
				if len(labels) == 0 {
					delete(md, "labels")
				}
			}
		}
		k := key(o)
		if _, dup := m[k]; dup {
			t.Fatalf("two objects %s", k)
		}
		m[k] = o
	}
	return m
}

func (c chartCase) helm(t *testing.T, helm string) map[string]object {
	t.Helper()
	args := []string{"template", release, filepath.Join(root(t), "deploy", "helm", "tally"), "-n", namespace}
	for _, s := range c.set {
		args = append(args, "--set", s)
	}
	return index(t, parse(t, run(t, helm, args...)))
}

func kustomize(t *testing.T, kubectl string, dirs []string, dropNamespace bool) map[string]object {
	t.Helper()
	var objs []object
	for _, d := range dirs {
		objs = append(objs, parse(t, run(t, kubectl, "kustomize", filepath.Join(root(t), d)))...)
	}
	m := index(t, objs)
	if dropNamespace {
		k := "Namespace /" + namespace
		if _, ok := m[k]; !ok {
			t.Fatalf("%v has no %s", dirs, k)
		}
		delete(m, k)
	}
	return m
}

type chartCase struct {
	name string
	set  []string
	// The kustomize directories whose objects the chart must render.
	dirs []string
	// The chart leaves the Namespace to helm install --create-namespace
	// unless createNamespace is set.
	dropNamespace bool
}

// TestChartMatchesDeploy renders the chart in each mode and compares it,
// object by object, with what kubectl kustomize makes of deploy/.
func TestChartMatchesDeploy(t *testing.T) {
	helm, kubectl := tools(t)
	for _, c := range []chartCase{
		{name: "defaults", dirs: []string{"deploy"}, dropNamespace: true},
		{name: "createNamespace", set: []string{"createNamespace=true"}, dirs: []string{"deploy"}},
		{name: "cert-manager", set: []string{"certMode=cert-manager"}, dirs: []string{"deploy/cert-manager"}, dropNamespace: true},
		{name: "cert-manager createNamespace", set: []string{"certMode=cert-manager", "createNamespace=true"}, dirs: []string{"deploy/cert-manager"}},
		{name: "serviceMonitor", set: []string{"metrics.serviceMonitor.enabled=true"}, dirs: []string{"deploy", "deploy/prometheus"}, dropNamespace: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.helm(t, helm)
			want := kustomize(t, kubectl, c.dirs, c.dropNamespace)
			compare(t, got, want)
		})
	}
}

func compare(t *testing.T, got, want map[string]object) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, inChart := got[k]
		w, inDeploy := want[k]
		switch {
		case !inChart:
			t.Errorf("%s: in deploy/, not rendered by the chart", k)
		case !inDeploy:
			t.Errorf("%s: rendered by the chart, not in deploy/", k)
		default:
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("%s differs (-deploy/ +chart):\n%s", k, d)
			}
		}
	}
	t.Logf("compared %d objects", len(keys))
}

// TestChartValues checks the values that deploy/ has no counterpart for.
func TestChartValues(t *testing.T) {
	helm, _ := tools(t)
	chart := filepath.Join(root(t), "deploy", "helm", "tally")

	t.Run("dashboard", func(t *testing.T) {
		m := chartCase{set: []string{"dashboard.enabled=true"}}.helm(t, helm)
		svc, ok := m["Service "+namespace+"/tally-dashboard"]
		if !ok {
			t.Fatal("no Service tally-dashboard")
		}
		if s := fmt.Sprint(svc["spec"]); !strings.Contains(s, "port:8090") || !strings.Contains(s, "targetPort:dashboard") {
			t.Errorf("Service tally-dashboard: spec %s, want port 8090 to targetPort dashboard", s)
		}
		c := container(t, m)
		if args := fmt.Sprint(c["args"]); !strings.Contains(args, "--dashboard-bind-address=:8090") {
			t.Errorf("args %s lack --dashboard-bind-address=:8090", args)
		}
		if ports := fmt.Sprint(c["ports"]); !strings.Contains(ports, "containerPort:8090") {
			t.Errorf("container ports %s lack 8090", ports)
		}
	})

	t.Run("image replicas resources config", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "queues.yaml")
		const queues = "apiVersion: tally.dev/v1\nkind: ResourceFlavor\nmetadata:\n  name: other\n"
		if err := os.WriteFile(cfg, []byte(queues), 0o644); err != nil {
			t.Fatal(err)
		}
		out := run(t, helm, "template", release, chart, "-n", namespace,
			"--set", "image.repository=registry.example/tally", "--set", "image.tag=v1",
			"--set", "image.pullPolicy=Always", "--set", "replicaCount=3",
			"--set", "resources.limits.memory=1Gi", "--set-file", "config="+cfg)
		m := index(t, parse(t, out))
		c := container(t, m)
		if c["image"] != "registry.example/tally:v1" || c["imagePullPolicy"] != "Always" {
			t.Errorf("image %v, pull policy %v", c["image"], c["imagePullPolicy"])
		}
		if r := fmt.Sprint(c["resources"]); !strings.Contains(r, "memory:1Gi") {
			t.Errorf("resources %s", r)
		}
		d := m["Deployment "+namespace+"/tally"]
		if r := d["spec"].(map[string]any)["replicas"]; fmt.Sprint(r) != "3" {
			t.Errorf("replicas %v", r)
		}
		data := m["ConfigMap "+namespace+"/tally-config"]["data"].(map[string]any)
		if data["queues.yaml"] != queues {
			t.Errorf("queues.yaml is %q, want %q", data["queues.yaml"], queues)
		}
	})

	t.Run("other namespace", func(t *testing.T) {
		for _, mode := range []string{"builtin", "cert-manager"} {
			out := run(t, helm, "template", release, chart, "-n", "queueing", "--set", "certMode="+mode,
				"--set", "createNamespace=true", "--set", "metrics.serviceMonitor.enabled=true")
			if i := bytes.Index(out, []byte(namespace)); i >= 0 {
				t.Errorf("certMode %s, -n queueing: %q still rendered: ...%s...", mode, namespace, out[max(0, i-200):min(len(out), i+100)])
			}
		}
	})

	t.Run("bad certMode", func(t *testing.T) {
		cmd := exec.Command(helm, "template", release, chart, "-n", namespace, "--set", "certMode=acme")
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "certMode must be builtin or cert-manager") {
			t.Errorf("certMode=acme: err %v, output:\n%s", err, out)
		}
	})
}

func container(t *testing.T, m map[string]object) map[string]any {
	t.Helper()
	d, ok := m["Deployment "+namespace+"/tally"]
	if !ok {
		t.Fatal("no Deployment tally")
	}
	spec := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return spec["containers"].([]any)[0].(map[string]any)
}
