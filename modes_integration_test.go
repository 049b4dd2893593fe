package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tally.dev/tally/kinds"
	"tally.dev/tally/kinds/kindstest"
	"tally.dev/tally/ledger"
	"tally.dev/tally/queues"
)

// TestIntegrationAdmissionPatch sends an admission write in each
// encoding of --admission-patch to a real API server: one write lands
// the change the merge patch makes (the template's other labels kept),
// and the same write decided on an older version fails with a Conflict,
// as the ledger's rollback expects.
func TestIntegrationAdmissionPatch(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	// Not bound: the webhook leaves its Jobs as written.
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "encodings"}}); err != nil {
		t.Fatal(err)
	}
	for _, mode := range ledger.AdmissionPatches {
		t.Run(string(mode), func(t *testing.T) {
			name := "j-" + string(mode)
			job := newJob("encodings", name, "1")
			job.Spec.Suspend = ptr.To(true)
			job.Labels = map[string]string{queues.LabelState: "pending"}
			job.Spec.Template.Labels = map[string]string{"app": "x"}
			if err := k8s.Create(ctx, job); err != nil {
				t.Fatal(err)
			}
			admission := func(rv string) []byte {
				b, err := json.Marshal(map[string]any{
					"metadata": map[string]any{"resourceVersion": rv, "labels": map[string]any{queues.LabelState: "admitted"},
						"annotations": map[string]any{queues.AnnotationFlavors: "main=on-demand"}},
					"spec": map[string]any{"suspend": false, "template": map[string]any{
						"metadata": map[string]any{"labels": map[string]any{queues.LabelWorkload: string(job.UID)}},
						"spec": map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
							"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "tier", "operator": "In", "values": []any{"on-demand"}}}}}}}}}}},
				})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			ref := func() *batchv1.Job {
				return kindstest.Job("encodings", name).TypeMeta().Obj()
			}
			// send writes the admission decided on seen, the Job as the
			// informer holds it (stripped).
			send := func(seen *batchv1.Job) error {
				cached, err := kinds.StripJob(seen.DeepCopy())
				if err != nil {
					t.Fatal(err)
				}
				patch, opts, err := ledger.EncodeAdmission(mode, ref(), cached.(*batchv1.Job), seen.ResourceVersion, admission(seen.ResourceVersion))
				if err != nil {
					t.Fatal(err)
				}
				return k8s.Patch(ctx, ref(), patch, opts...)
			}
			// Someone else writes in between (again if the ledger wrote
			// first: then old was not the version before the touch).
			var old *batchv1.Job
			for {
				old = getJob(t, "encodings", name)
				touched := old.DeepCopy()
				touched.Labels["touched"] = "yes"
				err := k8s.Update(ctx, touched)
				if err == nil {
					break
				}
				if !apierrors.IsConflict(err) {
					t.Fatal(err)
				}
			}
			if err := send(old); !apierrors.IsConflict(err) {
				t.Fatalf("write on version %s after a change: %v, want a Conflict", old.ResourceVersion, err)
			}
			// (The ledger keeps any Job with a state label as its own: a
			// pass that decides every queue may label this one
			// inadmissible, as in no queue, meanwhile.)
			if got := getJob(t, "encodings", name); !*got.Spec.Suspend || got.Labels[queues.LabelState] == "admitted" || got.Annotations[queues.AnnotationFlavors] != "" {
				t.Fatalf("the conflicting write changed the Job: suspend %v, labels %v, annotations %v", *got.Spec.Suspend, got.Labels, got.Annotations)
			}
			cur := getJob(t, "encodings", name)
			if err := send(cur); err != nil {
				t.Fatalf("write on the current version: %v", err)
			}
			got := getJob(t, "encodings", name)
			terms := queues.RequiredTerms(&got.Spec.Template.Spec)
			for _, c := range []struct{ what, got, want string }{
				{"suspend", fmt.Sprint(*got.Spec.Suspend), "false"},
				{"state", got.Labels[queues.LabelState], "admitted"},
				{"other label", got.Labels["touched"], "yes"},
				{"flavors", got.Annotations[queues.AnnotationFlavors], "main=on-demand"},
				{"template label app", got.Spec.Template.Labels["app"], "x"},
				{"template label " + queues.LabelWorkload, got.Spec.Template.Labels[queues.LabelWorkload], string(job.UID)},
				{"affinity", fmt.Sprint(len(terms) == 1 && terms[0].MatchExpressions[0].Values[0] == "on-demand"), "true"},
			} {
				if c.got != c.want {
					t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
				}
			}
			managers := map[string]bool{}
			for _, m := range got.ManagedFields {
				managers[m.Manager] = true
			}
			if !managers[queues.FieldManagerAdmission] {
				t.Errorf("no managedFields entry of %s: %v", queues.FieldManagerAdmission, managers)
			}
		})
	}
}
