package framework

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// PyTorchJobGVK is the Kubeflow training operator's PyTorchJob.
var PyTorchJobGVK = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}

// PyTorchJobBuilder makes PyTorchJobs as a user would submit them: a
// master and workers, each pod asking for GPUs.
type PyTorchJobBuilder struct {
	ns, name  string
	labels    map[string]string
	master    int64
	workers   int64
	gpus      int64
	runtime   time.Duration
	priority  string
	noSuspend bool
	// claim, when set, is the ResourceClaimTemplate each pod claims its
	// devices from, instead of asking for GPUs.
	claim string
	// annotations are set on both pod templates.
	annotations map[string]string
}

// NewPyTorchJob starts a PyTorchJob of one master and no workers, each pod
// asking for 1 GPU and 1 CPU, created with runPolicy.suspend: true.
func NewPyTorchJob(ns, name string) *PyTorchJobBuilder {
	return &PyTorchJobBuilder{ns: ns, name: name, labels: map[string]string{}, master: 1, gpus: 1}
}

// Workers sets how many worker pods it has.
func (b *PyTorchJobBuilder) Workers(n int64) *PyTorchJobBuilder { b.workers = n; return b }

// GPUs sets the GPUs of each pod.
func (b *PyTorchJobBuilder) GPUs(n int64) *PyTorchJobBuilder { b.gpus = n; return b }

// Runtime sets how long each pod runs on the simulated nodes.
func (b *PyTorchJobBuilder) Runtime(d time.Duration) *PyTorchJobBuilder { b.runtime = d; return b }

// PriorityClass sets the pods' priorityClassName.
func (b *PyTorchJobBuilder) PriorityClass(name string) *PyTorchJobBuilder {
	b.priority = name
	return b
}

// Label sets a label on the PyTorchJob.
func (b *PyTorchJobBuilder) Label(k, v string) *PyTorchJobBuilder { b.labels[k] = v; return b }

// ClaimFrom has each pod claim its devices from ResourceClaimTemplate
// name (Dynamic Resource Allocation) instead of asking for GPUs.
func (b *PyTorchJobBuilder) ClaimFrom(name string) *PyTorchJobBuilder { b.claim = name; return b }

// TemplateAnnotation sets an annotation on the master's and the workers'
// pod templates.
func (b *PyTorchJobBuilder) TemplateAnnotation(k, v string) *PyTorchJobBuilder {
	if b.annotations == nil {
		b.annotations = map[string]string{}
	}
	b.annotations[k] = v
	return b
}

// Unsuspended leaves runPolicy.suspend false, as a user who forgets it.
func (b *PyTorchJobBuilder) Unsuspended() *PyTorchJobBuilder { b.noSuspend = true; return b }

// Obj returns the PyTorchJob.
func (b *PyTorchJobBuilder) Obj() *unstructured.Unstructured {
	replica := func(n int64) map[string]any {
		container := map[string]any{
			"name": "pytorch", "image": "registry.example/pytorch:v1",
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "1", ResourceGPU: fmt.Sprint(b.gpus)},
				"limits":   map[string]any{ResourceGPU: fmt.Sprint(b.gpus)},
			},
		}
		spec := map[string]any{"containers": []any{container}}
		if b.claim != "" {
			container["resources"] = map[string]any{"requests": map[string]any{"cpu": "1"}, "claims": []any{map[string]any{"name": "gpu"}}}
			spec["resourceClaims"] = []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": b.claim}}
		}
		if b.priority != "" {
			spec["priorityClassName"] = b.priority
		}
		tpl := map[string]any{"spec": spec}
		ann := map[string]any{}
		for k, v := range b.annotations {
			ann[k] = v
		}
		if b.runtime > 0 {
			ann[AnnotationRuntime] = b.runtime.String()
		}
		if len(ann) > 0 {
			tpl["metadata"] = map[string]any{"annotations": ann}
		}
		return map[string]any{"replicas": n, "restartPolicy": "OnFailure", "template": tpl}
	}
	specs := map[string]any{"Master": replica(b.master)}
	if b.workers > 0 {
		specs["Worker"] = replica(b.workers)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"runPolicy":           map[string]any{"suspend": !b.noSuspend},
			"pytorchReplicaSpecs": specs,
		},
	}}
	u.SetGroupVersionKind(PyTorchJobGVK)
	u.SetNamespace(b.ns)
	u.SetName(b.name)
	if len(b.labels) > 0 {
		u.SetLabels(b.labels)
	}
	return u
}

// ReadObject reads one object from a YAML file, as kubectl apply -f would.
func ReadObject(path string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// PyTorchJobSuspended says runPolicy.suspend is true.
func PyTorchJobSuspended(u *unstructured.Unstructured) bool {
	s, _, _ := unstructured.NestedBool(u.Object, "spec", "runPolicy", "suspend")
	return s
}

// PyTorchJobCondition says condition t is true.
func PyTorchJobCondition(u *unstructured.Unstructured, t string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t && m["status"] == "True" {
			return true
		}
	}
	return false
}

// PyTorchJobFinished says it Succeeded or Failed.
func PyTorchJobFinished(u *unstructured.Unstructured) bool {
	return PyTorchJobCondition(u, "Succeeded") || PyTorchJobCondition(u, "Failed")
}

// PyTorchJobConditions lists its true conditions, for messages.
func PyTorchJobConditions(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["status"] == "True" {
			out = append(out, fmt.Sprint(m["type"]))
		}
	}
	return strings.Join(out, ",")
}

// ListPyTorchJobs lists the PyTorchJobs of ns.
func ListPyTorchJobs(ctx context.Context, c client.Reader, ns string) ([]unstructured.Unstructured, error) {
	l := pyTorchJobList()
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return l.Items, nil
}

func pyTorchJobList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(PyTorchJobGVK.GroupVersion().WithKind("PyTorchJobList"))
	return l
}

// Owner is the name of the controller owner of kind of o, or "".
func Owner(o client.Object, kind string) string {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == kind && r.Controller != nil && *r.Controller {
			return r.Name
		}
	}
	return ""
}

// RecordPyTorchJobs is Record for the PyTorchJobs of ns: it keeps their
// transitions (a PyTorchJob is completed once Succeeded), the moment the
// first pod of each appears (PodsCreated), and every pod each had, with
// its node (see Pods).
func RecordPyTorchJobs(ctx context.Context, c client.WithWatch, ns string) (*Recorder, error) {
	r := &Recorder{jobs: map[string]*JobHistory{}, podNodes: map[string]map[string]string{}}
	one := func(o runtime.Object, deleted bool) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || deleted {
			return
		}
		suspended := PyTorchJobSuspended(u)
		r.observe(view{name: u.GetName(), suspend: &suspended, completed: PyTorchJobCondition(u, "Succeeded"),
			state: u.GetLabels()[LabelState]}, time.Now())
	}
	pod := func(o runtime.Object, deleted bool) {
		p, ok := o.(*corev1.Pod)
		owner := ""
		if ok && !deleted {
			owner = Owner(p, PyTorchJobGVK.Kind)
		}
		if owner == "" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.podNodes[owner] == nil {
			r.podNodes[owner] = map[string]string{}
			r.obs = append(r.obs, Observation{Job: owner, Kind: PodsCreated, At: time.Now()})
		}
		if p.Spec.NodeName != "" || r.podNodes[owner][p.Name] == "" {
			r.podNodes[owner][p.Name] = p.Spec.NodeName
		}
	}
	r.f = follower{c: c, newList: func() client.ObjectList { return pyTorchJobList() }, opts: []client.ListOption{client.InNamespace(ns)},
		onList: func(items []runtime.Object) {
			for _, o := range items {
				one(o, false)
			}
		}, onChange: one}
	r.pods = &follower{c: c, newList: func() client.ObjectList { return &corev1.PodList{} }, opts: []client.ListOption{client.InNamespace(ns)},
		onList: func(items []runtime.Object) {
			for _, o := range items {
				pod(o, false)
			}
		}, onChange: pod}
	if err := r.f.start(ctx); err != nil {
		return nil, err
	}
	if err := r.pods.start(ctx); err != nil {
		_ = r.f.stop()
		return nil, err
	}
	return r, nil
}

// PodQuotaReport is what WatchPodQuota saw.
type PodQuotaReport struct {
	Polls int
	// MaxRunningGPUs is the largest sum, at one poll, of the GPUs of the
	// pods that have not succeeded or failed.
	MaxRunningGPUs int64
	// SawWaiting: at some poll a workload was suspended and unfinished
	// while pods ran.
	SawWaiting bool
	// Violations describes each poll where the pods' GPUs exceeded the
	// limit, or a suspended workload that was never admitted had a pod.
	Violations []string
	Err        error
}

// WatchPodQuota polls the pods and the PyTorchJobs of ns every interval
// until want PyTorchJobs have finished. Each poll lists the pods first and
// the PyTorchJobs second, so that a pod of a PyTorchJob still suspended at
// the second list was created while it was suspended: in a queue that
// does not preempt, that breaks all-or-nothing admission. The GPUs of the
// pods that run must stay within limit.
func WatchPodQuota(ctx context.Context, c client.Reader, ns string, limit int64, want int, interval, timeout time.Duration) PodQuotaReport {
	var rep PodQuotaReport
	rep.Err = Poll(ctx, interval, timeout, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error(), nil
		}
		pjs, err := ListPyTorchJobs(ctx, c, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		rep.Polls++
		suspended := map[string]bool{}
		finished, pending := 0, 0
		for i := range pjs {
			u := &pjs[i]
			switch {
			case PyTorchJobFinished(u):
				finished++
			case PyTorchJobSuspended(u):
				pending++
				suspended[u.GetName()] = true
			}
		}
		var running int64
		var holders, early []string
		for i := range pods.Items {
			p := &pods.Items[i]
			owner := Owner(p, PyTorchJobGVK.Kind)
			if owner != "" && suspended[owner] {
				early = append(early, p.Name)
			}
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			g := PodRequest(&p.Spec, ResourceGPU)
			running += g
			holders = append(holders, fmt.Sprintf("%s(%d)", p.Name, g))
		}
		rep.MaxRunningGPUs = max(rep.MaxRunningGPUs, running)
		if pending > 0 && running > 0 {
			rep.SawWaiting = true
		}
		now := time.Now().Format("15:04:05.000")
		if running > limit {
			sort.Strings(holders)
			rep.Violations = append(rep.Violations, fmt.Sprintf("%s: pods use %d GPUs > %d: %s", now, running, limit, strings.Join(holders, " ")))
		}
		if len(early) > 0 {
			sort.Strings(early)
			rep.Violations = append(rep.Violations, fmt.Sprintf("%s: pods of suspended PyTorchJobs exist: %s", now, strings.Join(early, " ")))
		}
		return finished >= want, fmt.Sprintf("%d of %d PyTorchJobs finished, %d pending, %d GPUs in pods", finished, len(pjs), pending, running), nil
	})
	return rep
}

// Pods maps each pod the workload owner ever had, as the pod watch saw it,
// to the node it was bound to ("" if none was seen).
func (r *Recorder) Pods(owner string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.podNodes[owner])
}
