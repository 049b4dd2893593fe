package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/queues"
)

func TestUnmanagedGuard(t *testing.T) {
	g := &UnmanagedGuard{Users: []string{tallySA}}
	plain := func() *batchv1.Job { return makeJob("team", "1") }
	with := func(state, queue string) func() *batchv1.Job {
		return func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Labels = map[string]string{"app": "train", queues.LabelState: state, queues.LabelQueue: queue}
			return j
		}
	}
	cases := []struct {
		name     string
		user     string
		old, obj func() *batchv1.Job // old nil: a CREATE
		// denied is a substring of the denial; "": allowed.
		denied string
	}{
		{name: "a Job without tally's label", obj: plain},
		{name: "a Job created with the state label", obj: with("pending", "gpu"),
			denied: "tally: metadata.labels[tally.dev/state]: only tally sets this label, and namespace team is not bound to a ClusterQueue (annotation tally.dev/cluster-queue), so a Job may not be created with it"},
		{name: "a Job created labelled admitted", obj: with("admitted", "gpu"), denied: "may not be created with it"},
		{name: "tally's own create", user: tallySA, obj: with("pending", "gpu")},
		{name: "the label added", old: plain, obj: with("pending", "gpu"), denied: `it may not be added or changed (from "" to "pending")`},
		{name: "the label changed", old: with("pending", "gpu"), obj: with("admitted", "gpu"), denied: `(from "pending" to "admitted")`},
		{name: "the queue of a labelled Job changed", old: with("pending", "gpu"), obj: with("pending", "cpu"),
			denied: `tally: metadata.labels[tally.dev/cluster-queue]: only tally sets the queue of a Job that carries tally.dev/state, and namespace team is not bound to a ClusterQueue; it may not change (from "gpu" to "cpu")`},
		{name: "a queued Job updated otherwise", old: with("pending", "gpu"), obj: func() *batchv1.Job {
			j := with("pending", "gpu")()
			j.Labels["app"] = "eval"
			return j
		}},
		{name: "the label removed", old: with("pending", "gpu"), obj: plain},
		{name: "tally relabels a queued Job", user: tallySA, old: with("pending", "gpu"), obj: with("admitted", "gpu")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := jobRequest(t, tc.obj())
			if tc.old != nil {
				req = updateRequest(t, "", tc.old(), tc.obj())
			}
			req.UserInfo.Username = tc.user
			resp := g.Handle(context.Background(), req)
			switch {
			case tc.denied == "" && !resp.Allowed:
				t.Errorf("denied: %s", resp.Result.Message)
			case tc.denied != "" && resp.Allowed:
				t.Errorf("allowed; want a denial with %q", tc.denied)
			case tc.denied != "" && !strings.Contains(resp.Result.Message, tc.denied):
				t.Errorf("denial %q; want it to contain %q", resp.Result.Message, tc.denied)
			}
		})
	}
	// A pod labelled as a single-pod workload tally queued.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p",
		Labels: map[string]string{queues.LabelWorkload: queues.PodWorkload, queues.LabelState: "pending", queues.LabelQueue: "gpu"}}}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	preq := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "team",
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}}}
	if resp := g.Handle(context.Background(), preq); resp.Allowed || !strings.Contains(resp.Result.Message, "so a Pod may not be created with it") {
		t.Errorf("a pod labelled as a queued single-pod workload: allowed=%v %q", resp.Allowed, resp.Result.Message)
	}
	// A body that is not a workload is refused, not let through.
	req := jobRequest(t, plain())
	req.Operation = admissionv1.Update
	req.Object = runtime.RawExtension{Raw: []byte(`{"metadata": 7}`)}
	if resp := g.Handle(context.Background(), req); resp.Allowed || resp.Result.Code != 400 {
		t.Errorf("a malformed object: allowed=%v code=%d", resp.Allowed, resp.Result.Code)
	}
}
