package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// queueLabel names a Job's ClusterQueue (tally's contract).
const queueLabel = "tally.dev/cluster-queue"

// Report is what the auditor writes.
type Report struct {
	// States counts the states checked: one per change seen.
	States int `json:"states"`
	// Overcommits lists the states where a limit was exceeded (the first
	// 100); OvercommitCount counts them all.
	Overcommits     []string `json:"overcommits"`
	OvercommitCount int      `json:"overcommitCount"`
	// Peak is the largest usage seen per limit, admitted and running.
	Peak map[string][2]int64   `json:"peak"`
	Jobs map[string]*JobRecord `json:"jobs"`
}

// JobRecord is the life of one Job as the auditor saw it.
type JobRecord struct {
	Queue       string      `json:"queue"`
	Created     time.Time   `json:"created"`
	Admitted    []time.Time `json:"admitted,omitempty"`
	Preempted   []time.Time `json:"preempted,omitempty"`
	Finished    time.Time   `json:"finished,omitzero"`
	Deleted     time.Time   `json:"deleted,omitzero"`
	suspended   bool
	finished    bool
	admittedNow bool
}

// limit bounds the usage of some ClusterQueues in one resource.
type limit struct {
	name     string
	queues   map[string]bool
	resource corev1.ResourceName
	max      int64
}

type charge struct {
	queue string
	use   map[corev1.ResourceName]int64
}

type auditor struct {
	limits []limit

	mu      sync.Mutex
	rep     Report
	jobs    map[types.UID]charge // admitted Jobs
	pods    map[types.UID]charge // running pods
	queueOf map[string]string    // namespace/name of a Job → its queue
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	config := flag.String("config", "", "config documents (ClusterQueues) to check against")
	namespaces := flag.String("namespaces", "", "comma-separated namespaces to watch")
	resources := flag.String("resources", "nvidia.com/gpu", "comma-separated resources to check")
	pytorchJobs := flag.Bool("pytorchjobs", false, "watch PyTorchJobs (kubeflow.org/v1) too; their CRD must be installed")
	out := flag.String("out", "audit.json", "where to write the report")
	flag.Parse()
	if err := run(*kubeconfig, *config, strings.Split(*namespaces, ","), strings.Split(*resources, ","), *pytorchJobs, *out); err != nil {
		fmt.Fprintln(os.Stderr, "auditor:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, config string, namespaces, resources []string, pytorchJobs bool, out string) error {
	b, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	limits, err := parseLimits(b, resources)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	a := &auditor{limits: limits, jobs: map[types.UID]charge{}, pods: map[types.UID]charge{}, queueOf: map[string]string{},
		rep: Report{Peak: map[string][2]int64{}, Jobs: map[string]*JobRecord{}}}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
		df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
		handlers := []struct {
			inf      cache.SharedIndexInformer
			onChange func(any)
			onDelete func(any)
		}{
			{f.Batch().V1().Jobs().Informer(), a.onJob, a.onJobDelete},
			{f.Core().V1().Pods().Informer(), a.onPod, a.onPodDelete},
		}
		if pytorchJobs {
			gvr := schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}
			handlers = append(handlers, struct {
				inf      cache.SharedIndexInformer
				onChange func(any)
				onDelete func(any)
			}{df.ForResource(gvr).Informer(), a.onPyTorchJob, a.onJobDelete})
		}
		for _, h := range handlers {
			if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: h.onChange, UpdateFunc: func(_, n any) { h.onChange(n) }, DeleteFunc: h.onDelete,
			}); err != nil {
				return err
			}
		}
		f.Start(ctx.Done())
		df.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("informer for %v did not sync", typ)
			}
		}
		for gvr, ok := range df.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("informer for %v did not sync", gvr)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "auditor: watching %v against %d limits\n", namespaces, len(limits))
	<-ctx.Done()
	a.mu.Lock()
	defer a.mu.Unlock()
	body, err := json.MarshalIndent(a.rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, body, 0o644)
}

// clusterQueue is what the auditor reads of a ClusterQueue document.
type clusterQueue struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Cohort         string `json:"cohort"`
		ResourceGroups []struct {
			Flavors []struct {
				Resources []struct {
					Name           corev1.ResourceName `json:"name"`
					NominalQuota   resource.Quantity   `json:"nominalQuota"`
					BorrowingLimit *resource.Quantity  `json:"borrowingLimit"`
				} `json:"resources"`
			} `json:"flavors"`
		} `json:"resourceGroups"`
	} `json:"spec"`
}

// parseLimits reads the ClusterQueues of a multi-document YAML file into
// limits: per queue, its nominal quota plus its borrowing limit (its
// cohort's total when it has none); per cohort, its queues' nominal quotas.
func parseLimits(b []byte, resources []string) ([]limit, error) {
	var cqs []clusterQueue
	for _, doc := range strings.Split(string(b), "\n---") {
		var cq clusterQueue
		if err := yaml.Unmarshal([]byte(doc), &cq); err != nil {
			return nil, err
		}
		if cq.Kind == "ClusterQueue" {
			cqs = append(cqs, cq)
		}
	}
	if len(cqs) == 0 {
		return nil, errors.New("no ClusterQueue in the config")
	}
	var out []limit
	for _, r := range resources {
		res := corev1.ResourceName(r)
		nominal, borrow, cohortTotal := map[string]int64{}, map[string]*int64{}, map[string]int64{}
		members := map[string]map[string]bool{}
		for _, cq := range cqs {
			q := cq.Metadata.Name
			for _, g := range cq.Spec.ResourceGroups {
				for _, f := range g.Flavors {
					for _, fr := range f.Resources {
						if fr.Name != res {
							continue
						}
						nominal[q] += fr.NominalQuota.Value()
						if fr.BorrowingLimit != nil {
							v := fr.BorrowingLimit.Value()
							if borrow[q] != nil {
								v += *borrow[q]
							}
							borrow[q] = &v
						}
					}
				}
			}
			c := cq.Spec.Cohort
			if c == "" {
				continue
			}
			cohortTotal[c] += nominal[q]
			if members[c] == nil {
				members[c] = map[string]bool{}
			}
			members[c][q] = true
		}
		for _, cq := range cqs {
			q, c := cq.Metadata.Name, cq.Spec.Cohort
			max := nominal[q]
			switch {
			case c == "":
			case borrow[q] != nil:
				max += *borrow[q]
			default:
				max = cohortTotal[c]
			}
			out = append(out, limit{name: "ClusterQueue " + q, queues: map[string]bool{q: true}, resource: res, max: max})
		}
		for c, qs := range members {
			out = append(out, limit{name: "cohort " + c, queues: qs, resource: res, max: cohortTotal[c]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func (a *auditor) onJob(obj any) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	finished := false
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			finished = true
		}
	}
	a.onWorkload(workload{
		key: j.Namespace + "/" + j.Name, uid: j.UID, queue: j.Labels[queueLabel], created: j.CreationTimestamp.Time,
		suspended: j.Spec.Suspend != nil && *j.Spec.Suspend, finished: finished,
		use: requests(&j.Spec.Template.Spec, int64(ptrOr(j.Spec.Parallelism, 1))),
	})
}

// onPyTorchJob reads a PyTorchJob: suspended by spec.runPolicy.suspend,
// finished by a true Succeeded or Failed condition, using the sum over
// its replica specs of replicas × the pod's requests.
func (a *auditor) onPyTorchJob(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	suspended, _, _ := unstructured.NestedBool(u.Object, "spec", "runPolicy", "suspend")
	finished := false
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && (m["type"] == "Succeeded" || m["type"] == "Failed") && m["status"] == "True" {
			finished = true
		}
	}
	use := map[corev1.ResourceName]int64{}
	specs, _, _ := unstructured.NestedMap(u.Object, "spec", "pytorchReplicaSpecs")
	for _, rs := range specs {
		m, _ := rs.(map[string]any)
		n, ok, _ := unstructured.NestedInt64(m, "replicas")
		if !ok {
			n = 1
		}
		tpl := &corev1.PodTemplateSpec{}
		if raw, ok := m["template"].(map[string]any); ok {
			_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, tpl)
		}
		for r, q := range requests(&tpl.Spec, n) {
			use[r] += q
		}
	}
	a.onWorkload(workload{
		key: u.GetNamespace() + "/" + u.GetName(), uid: u.GetUID(), queue: u.GetLabels()[queueLabel],
		created: u.GetCreationTimestamp().Time, suspended: suspended, finished: finished, use: use,
	})
}

// workload is what the auditor reads of a Job or a PyTorchJob.
type workload struct {
	key, queue          string
	uid                 types.UID
	created             time.Time
	suspended, finished bool
	use                 map[corev1.ResourceName]int64
}

func (a *auditor) onWorkload(w workload) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queueOf[w.key] = w.queue
	r := a.rep.Jobs[w.key]
	if r == nil {
		r = &JobRecord{Queue: w.queue, Created: w.created, suspended: w.suspended}
		a.rep.Jobs[w.key] = r
		if !w.suspended && w.queue != "" {
			r.Admitted = append(r.Admitted, now)
		}
	}
	switch {
	case r.suspended && !w.suspended:
		r.Admitted = append(r.Admitted, now)
	case !r.suspended && w.suspended && !w.finished:
		r.Preempted = append(r.Preempted, now)
	}
	if w.finished && !r.finished {
		r.Finished = now
	}
	r.suspended, r.finished = w.suspended, w.finished
	ch := charge{}
	if w.queue != "" && !w.suspended && !w.finished {
		ch = charge{queue: w.queue, use: w.use}
	}
	a.set(a.jobs, w.uid, ch, "admitted")
}

func (a *auditor) onJobDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.rep.Jobs[m.GetNamespace()+"/"+m.GetName()]; r != nil {
		r.Deleted = time.Now()
	}
	a.set(a.jobs, m.GetUID(), charge{}, "admitted")
}

func (a *auditor) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	owner := ""
	for _, r := range p.OwnerReferences {
		if r.Kind == "Job" || r.Kind == "PyTorchJob" {
			owner = p.Namespace + "/" + r.Name
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := charge{}
	// A pod holds resources once it is bound to a node, until it ends.
	if q := a.queueOf[owner]; q != "" && p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		ch = charge{queue: q, use: requests(&p.Spec, 1)}
	}
	a.set(a.pods, p.UID, ch, "running")
}

func (a *auditor) onPodDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.set(a.pods, p.UID, charge{}, "running")
	}
}

// set records what one object uses and checks every limit of that kind
// of usage (admitted or running). a.mu is held.
func (a *auditor) set(m map[types.UID]charge, uid types.UID, ch charge, kind string) {
	if ch.queue == "" {
		delete(m, uid)
	} else {
		m[uid] = ch
	}
	a.rep.States++
	for _, l := range a.limits {
		var sum int64
		var holders []string
		for id, c := range m {
			if l.queues[c.queue] && c.use[l.resource] > 0 {
				sum += c.use[l.resource]
				holders = append(holders, fmt.Sprintf("%s:%s=%d", c.queue, id[:8], c.use[l.resource]))
			}
		}
		peak := a.rep.Peak[l.name+" "+string(l.resource)]
		if kind == "admitted" {
			peak[0] = max(peak[0], sum)
		} else {
			peak[1] = max(peak[1], sum)
		}
		a.rep.Peak[l.name+" "+string(l.resource)] = peak
		if sum <= l.max {
			continue
		}
		a.rep.OvercommitCount++
		if len(a.rep.Overcommits) < 100 {
			sort.Strings(holders)
			a.rep.Overcommits = append(a.rep.Overcommits, fmt.Sprintf("%s: %s %s %s %d > %d: %s",
				time.Now().Format("15:04:05.000"), l.name, kind, l.resource, sum, l.max, strings.Join(holders, " ")))
		}
	}
}

// requests is n times what a pod of spec requests: the larger of its
// containers' sum and its largest init container, plus overhead. A
// container's limit stands for a request it does not make, as the API
// server defaults a pod's requests (a pod template's are not defaulted).
func requests(spec *corev1.PodSpec, n int64) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for _, c := range spec.Containers {
		for r, q := range effective(c.Resources) {
			out[r] += q.Value()
		}
	}
	for _, c := range spec.InitContainers {
		for r, q := range effective(c.Resources) {
			out[r] = max(out[r], q.Value())
		}
	}
	for r, q := range spec.Overhead {
		out[r] += q.Value()
	}
	for r := range out {
		out[r] *= n
	}
	return out
}

// effective is what a container requests: its requests, and its limits
// of the resources it requests nothing of.
func effective(r corev1.ResourceRequirements) corev1.ResourceList {
	out := maps.Clone(r.Requests)
	for n, q := range r.Limits {
		if _, ok := out[n]; !ok {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[n] = q
		}
	}
	return out
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
