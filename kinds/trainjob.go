package kinds

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// TrainJob is Kubeflow Trainer v2's trainer.kubeflow.org/v1alpha1
// TrainJob. It holds no pod template: the trainer controller (v2.3) runs
// it as a JobSet made from the runtime its spec.runtimeRef names (a
// ClusterTrainingRuntime, the default, or a TrainingRuntime of its
// namespace), whose spec.template is a JobSet template. Its pod sets are
// that template's replicatedJobs, each named by its name, counted and
// sized as the controller makes them:
//
//   - the trainer's Job (label trainer.kubeflow.org/trainjob-ancestor-step:
//     trainer; with an MPI policy, the Job named node) runs
//     spec.trainer.numNodes pods, else the runtime's mlPolicy.numNodes,
//     else 1 (an MPI runtime that runs its launcher as a node: numNodes-1,
//     at least 1); its container node gets spec.trainer.resourcesPerNode
//     over its own resources, resource by resource;
//   - every other Job runs its parallelism (default 1) pods; the
//     initializers' and the trainer's Jobs one replica, the others their
//     replicas (default 1).
//
// Each pod set's template is the runtime's with the TrainJob's
// spec.runtimePatches applied, as the controller applies them (where the
// pods run, their labels and annotations; the patches cannot change
// resources or counts), so the guard (webhook.Guard) sees a change of a
// patch that moves the pods (PodSet.PatchPath), and numNodes is the
// trainer's CountPath.
//
// A runtime that does not exist (or a runtimeRef of another kind) leaves
// the TrainJob Unresolved: inadmissible until it appears, which the
// ledger sees, as it watches the runtimes (References). The controller
// copies the runtime into a ConfigMap of the TrainJob's the first time
// it reconciles it, and builds from that copy afterwards; tally reads the
// runtime itself, so a runtime changed after a TrainJob was created is
// counted as changed while the pods keep the old one, and the pod gate
// (webhook.PodGate) holds any pod that no longer fits.
//
// It is suspended by spec.suspend and finished when Complete or Failed.
// tally narrows it by a runtime patch of its own (spec.runtimePatches,
// manager tally.dev/tally): at admission the chosen flavor's node
// labels as the nodeSelector and its tolerations, with the workload's
// labels and annotations, for each replicated Job; once an evicted one
// has stopped, the patch goes (trainJobWrites). The controller makes the
// JobSet owned by the TrainJob, so the JobSet, its Jobs and their pods
// are parts of it (Registry.Owner).
type TrainJob struct {
	get Lookup
}

const (
	trainerGroup = "trainer.kubeflow.org"
	// TrainJobPatchManager is the manager of tally's entry of a
	// TrainJob's spec.runtimePatches.
	TrainJobPatchManager = "tally.dev/tally"
	trainJobAncestor     = "trainer.kubeflow.org/trainjob-ancestor-step"
)

var (
	trainJobSuspend  = []string{"spec", "suspend"}
	trainJobPatches  = []string{"spec", "runtimePatches"}
	trainJobNumNodes = []string{"spec", "trainer", "numNodes"}
	trainJobGVK      = schema.GroupVersionKind{Group: trainerGroup, Version: "v1alpha1", Kind: "TrainJob"}
	trainJobRefs     = []Reference{
		{GVK: schema.GroupVersionKind{Group: trainerGroup, Version: "v1alpha1", Kind: "ClusterTrainingRuntime"}, Resource: "clustertrainingruntimes"},
		{GVK: schema.GroupVersionKind{Group: trainerGroup, Version: "v1alpha1", Kind: "TrainingRuntime"}, Resource: "trainingruntimes", Namespaced: true},
	}
)

func (TrainJob) GVK() schema.GroupVersionKind { return trainJobGVK }
func (TrainJob) Resource() string             { return "trainjobs" }
func (TrainJob) New() client.Object           { return newUnstructured(trainJobGVK) }
func (TrainJob) NewList() client.ObjectList   { return newUnstructuredList(trainJobGVK) }
func (TrainJob) SuspendPath() []string        { return trainJobSuspend }
func (TrainJob) writes() writes               { return trainJobWrites{} }
func (TrainJob) references() []Reference      { return trainJobRefs }
func (TrainJob) withLookup(get Lookup) Kind   { return TrainJob{get: get} }

// Shape: a TrainJob holds no pod template, but resources for one, and
// patches to its runtime's templates.
func (TrainJob) Shape() any {
	return &struct {
		Spec struct {
			Trainer struct {
				ResourcesPerNode corev1.ResourceRequirements `json:"resourcesPerNode"`
			} `json:"trainer"`
			RuntimePatches []struct {
				TrainingRuntimeSpec struct {
					Template struct {
						Spec struct {
							ReplicatedJobs []struct {
								Template struct {
									Spec struct {
										Template corev1.PodTemplateSpec `json:"template"`
									} `json:"spec"`
								} `json:"template"`
							} `json:"replicatedJobs"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"trainingRuntimeSpec"`
			} `json:"runtimePatches"`
		} `json:"spec"`
	}{}
}

func (k TrainJob) Read(obj client.Object) (*Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, errShape(k, obj)
	}
	o := &Object{Kind: k, Obj: u, Meta: metaOf(u), suspendParent: true}
	o.Suspended, _, _ = unstructured.NestedBool(u.Object, "spec", "suspend")
	jobs, _, _ := unstructured.NestedSlice(u.Object, "status", "jobsStatus")
	for _, j := range jobs {
		if m, ok := j.(map[string]any); ok {
			if a, ok := number(m["active"]); ok {
				o.Active += int32(a)
			}
		}
	}
	o.readConditions(u, "Complete", "Failed")
	runtime, err := k.runtime(o, u)
	if err != nil || runtime == nil {
		return o, err
	}
	return o, trainJobPodSets(o, u, runtime)
}

// runtime finds the runtime u names, recording it in o.Refs; nil when it
// cannot, with o.Unresolved saying why.
func (k TrainJob) runtime(o *Object, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name, _, _ := unstructured.NestedString(u.Object, "spec", "runtimeRef", "name")
	group, _, _ := unstructured.NestedString(u.Object, "spec", "runtimeRef", "apiGroup")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "runtimeRef", "kind")
	if group == "" {
		group = trainerGroup
	}
	if kind == "" {
		kind = trainJobRefs[0].GVK.Kind
	}
	var ref *Reference
	for i := range trainJobRefs {
		if trainJobRefs[i].GVK.Group == group && trainJobRefs[i].GVK.Kind == kind {
			ref = &trainJobRefs[i]
		}
	}
	if ref == nil || name == "" {
		o.Unresolved = fmt.Sprintf("spec.runtimeRef: %q of kind %q in group %q is not a ClusterTrainingRuntime or TrainingRuntime of %s", name, kind, group, trainerGroup)
		return nil, nil
	}
	r := ObjectRef{GVK: ref.GVK, Name: name}
	what := fmt.Sprintf("%s %q", kind, name)
	if ref.Namespaced {
		r.Namespace = o.Meta.Namespace
		what = fmt.Sprintf("%s %q", kind, r.Namespace+"/"+name)
	}
	o.Refs = []ObjectRef{r}
	if k.get == nil {
		o.Unresolved = what + " cannot be read here"
		return nil, nil
	}
	rt, err := k.get(r.GVK, r.Namespace, r.Name)
	switch {
	case err != nil:
		o.Unresolved = fmt.Sprintf("%s cannot be read: %v", what, err)
		return nil, nil
	case rt == nil:
		o.Unresolved = what + " not found"
		return nil, nil
	}
	o.RefsVersion = rt.GetResourceVersion()
	return rt, nil
}

// trainJobPodSets reads o's pod sets from its runtime rt, with u's
// overrides, as the trainer controller makes its JobSet.
func trainJobPodSets(o *Object, u, rt *unstructured.Unstructured) error {
	rjs, _, _ := unstructured.NestedSlice(rt.Object, "spec", "template", "spec", "replicatedJobs")
	policy, hasPolicy, _ := unstructured.NestedMap(rt.Object, "spec", "mlPolicy")
	_, mpi := policy["mpi"]
	launcherAsNode, _, _ := unstructured.NestedBool(policy, "mpi", "runLauncherAsNode")
	numNodes, numSet, err := optionalCount(u.Object, "spec", "trainer", "numNodes")
	if err != nil {
		return err
	}
	perNode := &corev1.ResourceRequirements{}
	if raw, ok, _ := unstructured.NestedMap(u.Object, "spec", "trainer", "resourcesPerNode"); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, perNode); err != nil {
			return fmt.Errorf("spec.trainer.resourcesPerNode: %w", err)
		}
	} else {
		perNode = nil
	}
	src := fmt.Sprintf("%s %s", rt.GetKind(), rt.GetName())
	for i, rj := range rjs {
		at := fmt.Sprintf("%s: spec.template.spec.replicatedJobs[%d]", src, i)
		m, ok := rj.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not an object", at)
		}
		name, _ := m["name"].(string)
		ancestor, _, _ := unstructured.NestedString(m, "template", "metadata", "labels", trainJobAncestor)
		trainer := ancestor == "trainer" && hasPolicy
		replicas, err := count(m, 1, at, "replicas")
		if err != nil {
			return err
		}
		if ancestor == "trainer" || ancestor == "dataset-initializer" || ancestor == "model-initializer" {
			replicas = 1
		}
		pods, err := count(m, 1, at, "template", "spec", "parallelism")
		if err != nil {
			return err
		}
		if trainer {
			if pods, err = count(policy, 1, src+": spec.mlPolicy", "numNodes"); err != nil {
				return err
			}
		}
		if numSet && (mpi && name == "node" || !mpi && ancestor == "trainer") {
			pods = numNodes
			if mpi && launcherAsNode {
				pods = max(numNodes-1, 1)
			}
		}
		tpl, err := template(m, "template", "spec", "template")
		if err != nil {
			return fmt.Errorf("%s.template.spec.template: %w", at, err)
		}
		if tpl, err = patchTemplate(u, name, tpl); err != nil {
			return err
		}
		if perNode != nil && (trainer || mpi && launcherAsNode && name == "node") {
			for c := range tpl.Spec.Containers {
				if tpl.Spec.Containers[c].Name == "node" {
					mergeResources(&tpl.Spec.Containers[c].Resources, perNode)
					break
				}
			}
		}
		ps := PodSet{Name: name, Count: replicas * pods, Template: tpl, PatchPath: trainJobPatches}
		if mpi && name == "node" || !mpi && ancestor == "trainer" {
			ps.CountPath = trainJobNumNodes
		}
		o.PodSets = append(o.PodSets, ps)
	}
	return nil
}

// patchTemplate applies to tpl, the pod template of u's runtime's
// replicated Job name, each entry of u's spec.runtimePatches that patches
// it, in order, as the trainer controller does: a strategic merge patch
// of the Job's pod template (spec.template of the entry's replicated Job
// of that name). So tpl is where its pods run, with whose patches they
// run there: tally's entry and the others'.
func patchTemplate(u *unstructured.Unstructured, name string, tpl *corev1.PodTemplateSpec) (*corev1.PodTemplateSpec, error) {
	list, _, _ := unstructured.NestedSlice(u.Object, trainJobPatches...)
	for i, e := range list {
		entry, _ := e.(map[string]any)
		rjs, _, _ := unstructured.NestedSlice(entry, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
		for j, rj := range rjs {
			m, _ := rj.(map[string]any)
			patch, ok, _ := unstructured.NestedFieldNoCopy(m, "template", "spec", "template")
			if m["name"] != name || !ok {
				continue
			}
			at := fmt.Sprintf("spec.runtimePatches[%d].trainingRuntimeSpec.template.spec.replicatedJobs[%d].template.spec.template", i, j)
			src, err := json.Marshal(tpl)
			if err != nil {
				return nil, err
			}
			raw, err := json.Marshal(patch)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			merged, err := strategicpatch.StrategicMergePatch(src, raw, corev1.PodTemplateSpec{})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			tpl = &corev1.PodTemplateSpec{}
			if err := json.Unmarshal(merged, tpl); err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
		}
	}
	return tpl, nil
}

// optionalCount reads the number at path in m, and whether it is set.
func optionalCount(m map[string]any, path ...string) (int64, bool, error) {
	v, set, _ := unstructured.NestedFieldNoCopy(m, path...)
	if !set || v == nil {
		return 0, false, nil
	}
	n, ok := number(v)
	if !ok {
		return 0, false, fmt.Errorf("%s: not a number", FieldPath(path))
	}
	return n, true, nil
}

// mergeResources sets over's limits and requests in r, each resource
// replacing r's own, as the trainer controller merges resourcesPerNode.
func mergeResources(r, over *corev1.ResourceRequirements) {
	for name, q := range over.Limits {
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits[name] = q
	}
	for name, q := range over.Requests {
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = q
	}
}

// trainJobWrites narrow a TrainJob by tally's entry of its
// spec.runtimePatches (TrainJobPatchManager), the one place a TrainJob
// changes its pods: at admission it sets, for each replicated Job, the
// chosen flavor's node labels as the nodeSelector and its tolerations,
// and the labels and annotations tally gives pod templates; a restore
// removes it. A merge patch replaces the whole list, so the entries of
// other managers are copied from the object into it.
type trainJobWrites struct{ templateWrites }

func (trainJobWrites) templates(p MergePatch, t *Target, combos [][]*flavors.Flavor, suspend bool, annotations map[string]any) error {
	var rjs []any
	if !suspend {
		for i, ps := range t.W.PodSets {
			sel, tols := map[string]any{}, []corev1.Toleration{}
			for _, f := range t.combosOf(i, combos)[0] {
				for k, v := range f.NodeLabels {
					sel[k] = v
				}
				tols = append(tols, f.Tolerations...)
			}
			labels := map[string]any{queues.LabelWorkload: string(t.W.UID)}
			if len(t.Pinned) > 0 {
				labels[queues.LabelPodSet] = ps.Name
			}
			meta := map[string]any{"labels": labels}
			if f, ok := annotations[queues.AnnotationFlavors]; ok {
				meta["annotations"] = map[string]any{queues.AnnotationPodQueue: t.W.Queue, queues.AnnotationFlavors: f}
			}
			spec := map[string]any{"nodeSelector": sel}
			if len(tols) > 0 {
				raw, err := json.Marshal(tols)
				if err != nil {
					return err
				}
				var list []any
				if err := json.Unmarshal(raw, &list); err != nil {
					return err
				}
				spec["tolerations"] = list
			}
			rjs = append(rjs, map[string]any{"name": ps.Name, "template": map[string]any{"spec": map[string]any{
				"template": map[string]any{"metadata": meta, "spec": spec}}}})
		}
	}
	var patches []any
	list, _, _ := unstructured.NestedSlice(t.Src, "spec", "runtimePatches")
	for _, e := range list {
		if m, ok := e.(map[string]any); !ok || m["manager"] != TrainJobPatchManager {
			patches = append(patches, e)
		}
	}
	if rjs != nil {
		patches = append(patches, map[string]any{"manager": TrainJobPatchManager,
			"trainingRuntimeSpec": map[string]any{"template": map[string]any{"spec": map[string]any{"replicatedJobs": rjs}}}})
	}
	if patches == nil && list == nil {
		return nil
	}
	p.Set([]string{"spec", "runtimePatches"}, patches)
	return nil
}

// restoreDue: a TrainJob holds no pod template; restoreDueOf reads its
// runtime patches instead.
func (trainJobWrites) restoreDue(PodSet, string, [][]*flavors.Flavor) (bool, error) {
	return false, nil
}

// restoreDueOf says whether o, a TrainJob, still has tally's runtime
// patch, so still carries the flavor it ran in.
func (trainJobWrites) restoreDueOf(o *Object) bool {
	list, _, _ := unstructured.NestedSlice(o.Source(), "spec", "runtimePatches")
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && m["manager"] == TrainJobPatchManager {
			return true
		}
	}
	return false
}
