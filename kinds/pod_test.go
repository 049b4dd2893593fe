package kinds

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/queues"
)

func TestPodRead(t *testing.T) {
	pod := func(label string, gates ...string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p", UID: "u1", Labels: map[string]string{}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
		}
		if label != "" {
			p.Labels[queues.LabelWorkload] = label
		}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		workload   bool
		suspended  bool
		resume     any
		suspendVal any
	}{
		{"no label", pod(""), false, false, nil, nil},
		{"another workload's pod", pod("job-uid"), false, false, nil, nil},
		{"queued", pod(queues.PodWorkload, queues.SchedulingGate), true, true, nil,
			[]corev1.PodSchedulingGate{{Name: queues.SchedulingGate}}},
		{"queued behind another gate too", pod(queues.PodWorkload, "other", queues.SchedulingGate), true, true,
			[]corev1.PodSchedulingGate{{Name: "other"}},
			[]corev1.PodSchedulingGate{{Name: "other"}, {Name: queues.SchedulingGate}}},
		{"admitted", pod("u1"), true, false, nil, []corev1.PodSchedulingGate{{Name: queues.SchedulingGate}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Pod{}.Read(tc.pod)
			if !tc.workload {
				if err == nil {
					t.Fatalf("Read took a pod that is not a single-pod workload")
				}
				if _, ok := builtins.Of(tc.pod); ok {
					t.Fatalf("Of took a pod that is not a single-pod workload")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Suspended != tc.suspended {
				t.Errorf("Suspended = %v, want %v", o.Suspended, tc.suspended)
			}
			if len(o.PodSets) != 1 || o.PodSets[0].Count != 1 || o.PodSets[0].Path == nil || len(o.PodSets[0].Path) != 0 {
				t.Errorf("pod sets %+v, want one of one pod at the root", o.PodSets)
			}
			if got := o.SuspendValue(false); !equalGates(got, tc.resume) {
				t.Errorf("SuspendValue(false) = %v, want %v", got, tc.resume)
			}
			if got := o.SuspendValue(true); !equalGates(got, tc.suspendVal) {
				t.Errorf("SuspendValue(true) = %v, want %v", got, tc.suspendVal)
			}
			w := o.Workload("q", 0)
			if got := w.Total().String(); got != "nvidia.com/gpu=1" {
				t.Errorf("charged %s, want nvidia.com/gpu=1 (a limit stands for the request)", got)
			}
		})
	}
	if !EvictsByDeletion(Pod{}) || !IsPodKind(Pod{}) || !(Target{Kind: Pod{}}).MergeOnly() || EvictsByDeletion(Job{}) || IsPodKind(Job{}) {
		t.Error("the Pod kind's markers are wrong")
	}
}

func equalGates(a, b any) bool {
	ga, _ := a.([]corev1.PodSchedulingGate)
	gb, _ := b.([]corev1.PodSchedulingGate)
	if (a == nil) != (b == nil) || len(ga) != len(gb) {
		return false
	}
	for i := range ga {
		if ga[i] != gb[i] {
			return false
		}
	}
	return true
}

func TestJobSuspendValue(t *testing.T) {
	o, err := Job{}.Read(&batchv1.Job{})
	if err != nil {
		t.Fatal(err)
	}
	if o.SuspendValue(false) != false || o.SuspendValue(true) != true {
		t.Error("a Job's suspend value is not the boolean itself")
	}
}
