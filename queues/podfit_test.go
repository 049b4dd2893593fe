package queues

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues/queuestest"
)

// res builds per-pod requests: cpu in millicores, GPUs whole.
func res(cpu, gpu int64) flavors.Resources {
	r := flavors.Resources{}
	if cpu > 0 {
		r[corev1.ResourceCPU] = flavors.Amount(cpu)
	}
	if gpu > 0 {
		r["nvidia.com/gpu"] = flavors.Amount(gpu)
	}
	return r
}

func coveredCPUGPU(r corev1.ResourceName) bool {
	return r == corev1.ResourceCPU || r == "nvidia.com/gpu"
}

func TestFitPods(t *testing.T) {
	master := PodSet{Name: "master", Count: 1, Requests: res(1000, 8)}
	worker := PodSet{Name: "worker", Count: 3, Requests: res(1000, 1)}
	main := PodSet{Name: "main", Count: 2, Requests: res(500, 0)}
	for _, tc := range []struct {
		name string
		sets []PodSet
		live []flavors.Resources
		pod  flavors.Resources
		want PodFit
	}{
		{"first pod", []PodSet{main}, nil, res(500, 0), PodFits},
		{"smaller pod", []PodSet{main}, nil, res(100, 0), PodFits},
		{"second of two", []PodSet{main}, []flavors.Resources{res(500, 0)}, res(500, 0), PodFits},
		{"third of two", []PodSet{main}, []flavors.Resources{res(500, 0), res(500, 0)}, res(500, 0), PodTooMany},
		{"larger by a sidecar", []PodSet{main}, nil, res(600, 0), PodTooLarge},
		{"larger in a resource not covered", []PodSet{main}, nil, flavors.Resources{corev1.ResourceCPU: 500, corev1.ResourceMemory: 1 << 30}, PodFits},
		{"a GPU where none was admitted", []PodSet{main}, nil, res(500, 1), PodTooLarge},
		{"master then workers", []PodSet{master, worker}, []flavors.Resources{res(1000, 8)}, res(1000, 1), PodFits},
		{"a worker-sized pod may take the master's place", []PodSet{master, worker}, []flavors.Resources{res(1000, 1), res(1000, 1), res(1000, 1)}, res(1000, 1), PodFits},
		{"five worker-sized pods", []PodSet{master, worker}, []flavors.Resources{res(1000, 1), res(1000, 1), res(1000, 1), res(1000, 1)}, res(1000, 1), PodTooMany},
		{"a second master", []PodSet{master, worker}, []flavors.Resources{res(1000, 8)}, res(1000, 8), PodTooMany},
		{"a second master while workers are few", []PodSet{master, worker}, []flavors.Resources{res(1000, 8), res(1000, 1)}, res(1000, 8), PodTooMany},
		{"a master-sized pod beyond the master", []PodSet{master, worker}, nil, res(1000, 9), PodTooLarge},
		{"no pod sets", nil, nil, res(1, 0), PodTooLarge},
		{"asks nothing covered", []PodSet{main}, []flavors.Resources{res(500, 0), res(500, 0)}, flavors.Resources{}, PodTooMany},
		{"within what its controller adds uncharged", []PodSet{{Name: "main", Count: 1, Requests: res(500, 0), Uncharged: res(50, 0)}}, nil, res(550, 0), PodFits},
		{"beyond what its controller adds uncharged", []PodSet{{Name: "main", Count: 1, Requests: res(500, 0), Uncharged: res(50, 0)}}, nil, res(551, 0), PodTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FitPods(tc.sets, tc.live, tc.pod, coveredCPUGPU); got != tc.want {
				t.Errorf("FitPods = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestHallMatchesBruteForce checks FitPods's assignment check against
// every assignment of pods to pod sets, on small random cases.
func TestHallMatchesBruteForce(t *testing.T) {
	seed := uint64(1)
	next := func(n int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	for i := range 500 {
		nsets := 1 + next(3)
		sets := make([]PodSet, nsets)
		for s := range sets {
			sets[s] = PodSet{Name: fmt.Sprint(s), Count: int64(next(3)), Requests: res(int64(1+next(3)), int64(next(3)))}
		}
		npods := next(6)
		pods := make([]flavors.Resources, npods)
		for p := range pods {
			pods[p] = res(int64(1+next(3)), int64(next(3)))
		}
		masks := make([]uint64, len(pods))
		for p, r := range pods {
			for s := range sets {
				if sets[s].within(r, coveredCPUGPU) {
					masks[p] |= 1 << s
				}
			}
		}
		if got, want := hall(sets, masks), bruteAssign(sets, masks, make([]int64, len(sets)), 0); got != want {
			t.Fatalf("case %d: sets %v, pods %v: hall = %v, brute force = %v", i, sets, pods, got, want)
		}
	}
}

func bruteAssign(sets []PodSet, masks []uint64, used []int64, p int) bool {
	if p == len(masks) {
		return true
	}
	for s := range sets {
		if masks[p]&(1<<s) != 0 && used[s] < sets[s].Count {
			used[s]++
			ok := bruteAssign(sets, masks, used, p+1)
			used[s]--
			if ok {
				return true
			}
		}
	}
	return false
}

func TestPodExcess(t *testing.T) {
	main := PodSet{Name: "main", Count: 2, Requests: res(500, 1)}
	small := PodSet{Name: "small", Count: 2, Requests: res(100, 0)}
	for _, tc := range []struct {
		name string
		sets []PodSet
		pod  flavors.Resources
		want string
	}{
		{"fits", []PodSet{main}, res(500, 1), ""},
		{"a sidecar's CPU", []PodSet{main}, res(600, 1), "cpu=100m"},
		{"the pod set it exceeds least", []PodSet{small, main}, res(700, 1), "cpu=200m"},
		{"uncovered resources are not counted", []PodSet{main}, flavors.Resources{corev1.ResourceCPU: 600, corev1.ResourceMemory: 1 << 20}, "cpu=100m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodExcess(tc.sets, tc.pod, coveredCPUGPU).String(); got != tc.want {
				t.Errorf("PodExcess = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPodOverheadAnnotation(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"cpu=100m,memory=64Mi", "cpu=100m,memory=64Mi"},
		{" memory=64Mi , cpu=100m", "cpu=100m,memory=64Mi"},
		{"cpu=-1,memory=x,=1,gpu", ""},
		{"cpu=0,nvidia.com/gpu=1", "nvidia.com/gpu=1"},
	} {
		if got := FormatPodOverhead(ParsePodOverhead(tc.in)); got != tc.want {
			t.Errorf("ParsePodOverhead(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	spec := &corev1.PodSpec{Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
	out := WithPodOverhead(spec, ParsePodOverhead("cpu=100m,memory=64Mi"))
	if got := FormatPodOverhead(out.Overhead); got != "cpu=350m,memory=64Mi" {
		t.Errorf("WithPodOverhead: overhead %q, want cpu=350m,memory=64Mi", got)
	}
	if got := FormatPodOverhead(spec.Overhead); got != "cpu=250m" {
		t.Errorf("WithPodOverhead changed its input: %q", got)
	}
	if WithPodOverhead(spec, nil) != spec {
		t.Error("WithPodOverhead copied a spec it had nothing to add to")
	}
}

func TestInjectCountsCoveredResourcesOnly(t *testing.T) {
	cfg, _, errs := Parse(queuestest.New().Flavor("default").
		ClusterQueue("cpu-only").Group("cpu").Quotas("default", "cpu=4").
		ClusterQueue("cpu-memory").Group("cpu", "memory").Quotas("default", "cpu=4", "memory=4Gi").Bytes())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	init := corev1.Container{Name: "wait", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("10Mi")}}}
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	d := &PodDefaults{Config: cfg}
	for _, tc := range []struct{ queue, want string }{
		{"cpu-only", "cpu=50m"},
		{"cpu-memory", "cpu=50m, memory=10Mi"},
		{"unknown", ""},
	} {
		if got := PodRequests(d.Inject(tc.queue, spec, []corev1.Container{init})).String(); got != tc.want {
			t.Errorf("queue %s: the pod asks for %q, want %q", tc.queue, got, tc.want)
		}
	}
	if len(spec.InitContainers) != 0 {
		t.Error("Inject changed the spec it was given")
	}
	if (*PodDefaults)(nil).Inject("cpu-only", spec, []corev1.Container{init}) != spec {
		t.Error("Inject without defaults copied the spec")
	}
	// What the pods ask for beyond the charge, in resources another
	// queue covers: the pod gate lets them ask that much.
	for _, tc := range []struct{ queue, want string }{
		{"cpu-only", "memory=10Mi"},
		{"cpu-memory", ""},
	} {
		if got := d.Uncharged(tc.queue, spec, []corev1.Container{init}).String(); got != tc.want {
			t.Errorf("queue %s: uncharged %q, want %q", tc.queue, got, tc.want)
		}
	}
	only, _, errs := Parse(queuestest.New().Flavor("default").
		ClusterQueue("cpu-only").Group("cpu").Quotas("default", "cpu=4").Bytes())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := (&PodDefaults{Config: only}).Uncharged("cpu-only", spec, []corev1.Container{init}); got != nil {
		t.Errorf("memory, which no queue covers, is uncharged %v: want nothing, as the pod gate does not compare it", got)
	}
}

// TestCovers: a pod is compared with its workload in every resource some
// ClusterQueue covers, not only its own queue's.
func TestCovers(t *testing.T) {
	cfg, _, errs := Parse([]byte(queuestest.New().Flavor("f").
		ClusterQueue("cpu-only").Group("cpu").Quotas("f", "cpu=4").
		ClusterQueue("cpu-mem").Group("cpu", "memory").Quotas("f", "cpu=4", "memory=1Gi").String()))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for r, want := range map[corev1.ResourceName]bool{corev1.ResourceCPU: true, corev1.ResourceMemory: true, "nvidia.com/gpu": false} {
		if got := cfg.Covers(r); got != want {
			t.Errorf("Covers(%s) = %v, want %v", r, got, want)
		}
	}
}

func TestPodConfined(t *testing.T) {
	gpu := map[string]string{"pool": "gpu", "zone": "a"}
	terms := func(ts ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts}}}
	}
	in := func(k string, vs ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: vs}
	}
	term := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: rs}
	}
	for _, tc := range []struct {
		name   string
		spec   corev1.PodSpec
		labels map[string]string
		want   bool
	}{
		{"a flavor that labels no nodes", corev1.PodSpec{NodeName: "any"}, nil, true},
		{"nothing asked", corev1.PodSpec{}, gpu, false},
		{"by nodeSelector", corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu", "zone": "a", "extra": "x"}}, gpu, true},
		{"nodeSelector with another value", corev1.PodSpec{NodeSelector: map[string]string{"pool": "cpu", "zone": "a"}}, gpu, false},
		{"nodeSelector missing one label", corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}}, gpu, false},
		{"a named node skips the scheduler", corev1.PodSpec{NodeName: "gpu-1", NodeSelector: map[string]string{"pool": "gpu", "zone": "a"}}, gpu, false},
		{"by affinity, as admission narrows", corev1.PodSpec{Affinity: terms(term(in("pool", "gpu"), in("zone", "a")))}, gpu, true},
		{"split between nodeSelector and affinity", corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}, Affinity: terms(term(in("zone", "a")))}, gpu, true},
		{"one ORed term leaves the flavor", corev1.PodSpec{Affinity: terms(term(in("pool", "gpu"), in("zone", "a")), term(in("pool", "other")))}, gpu, false},
		{"In with a second value", corev1.PodSpec{Affinity: terms(term(in("pool", "gpu", "cpu"), in("zone", "a")))}, gpu, false},
		{"NotIn pins nothing", corev1.PodSpec{Affinity: terms(term(corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"cpu"}}, in("zone", "a")))}, gpu, false},
		{"every term pins it", corev1.PodSpec{Affinity: terms(term(in("pool", "gpu"), in("zone", "a"), in("rack", "1")), term(in("zone", "a"), in("pool", "gpu")))}, gpu, true},
		{"empty affinity", corev1.PodSpec{Affinity: terms()}, gpu, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodConfined(&tc.spec, tc.labels); got != tc.want {
				t.Errorf("PodConfined = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeLabelsOf(t *testing.T) {
	cfg := &Config{Flavors: map[string]*flavors.Flavor{
		"gpu":   {Name: "gpu", NodeLabels: map[string]string{"pool": "gpu"}},
		"zone":  {Name: "zone", NodeLabels: map[string]string{"zone": "a"}},
		"plain": {Name: "plain"},
	}}
	for _, tc := range []struct {
		ann     string
		want    map[string]string
		missing string
	}{
		{"", nil, ""},
		{"main=plain", nil, ""},
		{"main=gpu", map[string]string{"pool": "gpu"}, ""},
		{"master=gpu+zone,worker=gpu+zone", map[string]string{"pool": "gpu", "zone": "a"}, ""},
		{"main=gone", nil, "gone"},
		{"main=", nil, ""},
	} {
		got, missing, ok := cfg.NodeLabelsOf(AdmittedFlavors(tc.ann))
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || missing != tc.missing || ok != (tc.missing == "") {
			t.Errorf("NodeLabelsOf(AdmittedFlavors(%q)) = %v, %q, %v; want %v, %q", tc.ann, got, missing, ok, tc.want, tc.missing)
		}
	}
}
