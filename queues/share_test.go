package queues

import (
	"fmt"
	"maps"
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/flavors"
)

// TestShareBound: a Share keeps at most ShareMax values, then starts
// again; what it handed out stays as it was.
func TestShareBound(t *testing.T) {
	var s Share[string, *int]
	first := new(int)
	if got := s.Of("k0", first); got != first {
		t.Fatal("the first value for a key is not the one given")
	}
	for i := 1; i < ShareMax; i++ {
		s.Of(fmt.Sprint("k", i), new(int))
	}
	if got := s.Of("k0", new(int)); got != first {
		t.Fatal("a key seen before, with the share not full, got another value")
	}
	s.Of("one more", new(int))
	if len(s.values) != 1 {
		t.Fatalf("a full share took one more and holds %d values, want 1", len(s.values))
	}
	if again := new(int); s.Of("k0", again) != again {
		t.Fatal("a share started again still handed out a value from before")
	}
}

// TestUsageOfShares: Jobs that hold the same in the same flavors share
// one usage; a Job of other requests, or charged to another flavor, has
// its own, as before.
func TestUsageOfShares(t *testing.T) {
	cfg := makeConfig([]*flavors.Flavor{flavor("a"), flavor("b")}, makeCQ("q").Group("cpu").Flavor("a", "cpu=8").Flavor("b", "cpu=8").Obj())
	one, two := makeWL("one", "q", 0).Req("cpu", "2").Obj(), makeWL("two", "q", 1).Req("cpu", "2").Obj()
	more := makeWL("more", "q", 2).Req("cpu", "3").Obj()
	same := func(x, y Usage) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	u1, u2 := UsageOf(cfg, one, "main=a"), UsageOf(cfg, two, "main=a")
	if !same(u1, u2) {
		t.Errorf("two Jobs of 2 cpu in flavor a do not share their usage")
	}
	u3, u4 := UsageOf(cfg, more, "main=a"), UsageOf(cfg, two, "main=b")
	if same(u1, u3) || same(u1, u4) {
		t.Errorf("Jobs of other requests or flavors share a usage")
	}
	want := map[string]Usage{
		"u1": {{Flavor: "a", Resource: "cpu"}: amt("cpu", "2")},
		"u3": {{Flavor: "a", Resource: "cpu"}: amt("cpu", "3")},
		"u4": {{Flavor: "b", Resource: "cpu"}: amt("cpu", "2")},
	}
	for name, got := range map[string]Usage{"u1": u1, "u3": u3, "u4": u4} {
		if !got.Equal(want[name]) {
			t.Errorf("%s = %v, want %v", name, got, want[name])
		}
	}
}

// TestWorkloadsShareRequests: Workloads of pods of the same requests
// share their pod sets' requests and their totals; one of other requests
// has its own.
func TestWorkloadsShareRequests(t *testing.T) {
	job := func(name, cpu string, count int32) *Workload {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		j.Spec.Parallelism = &count
		j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		return WorkloadFromJob(j, "q", 0)
	}
	same := func(x, y flavors.Resources) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	a, b, c := job("a", "2", 3), job("b", "2", 3), job("c", "3", 3)
	if !same(a.PodSets[0].Requests, b.PodSets[0].Requests) || !same(a.Total(), b.Total()) {
		t.Errorf("Jobs a and b, of the same pods, do not share their requests and totals")
	}
	if same(a.PodSets[0].Requests, c.PodSets[0].Requests) || same(a.Total(), c.Total()) {
		t.Errorf("Jobs a and c, of other requests, share them")
	}
	if got := a.Total()[corev1.ResourceCPU]; got != amt(corev1.ResourceCPU, "6") {
		t.Errorf("Job a's total cpu is %v, want 6", got)
	}
	if got := c.PodSets[0].Requests[corev1.ResourceCPU]; got != amt(corev1.ResourceCPU, "3") {
		t.Errorf("Job c's pods request %v cpu, want 3", got)
	}
}

// TestShareResources: maps of the same amounts share one map, whatever
// their number of resources (more than the key's buffer holds too); maps
// whose keys would run together unseparated do not; and a map shared
// before is found again without an allocation, as each event of a Job
// finds its requests.
func TestShareResources(t *testing.T) {
	same := func(x, y flavors.Resources) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	many := func(amount flavors.Amount) flavors.Resources {
		r := flavors.Resources{}
		for i := range 12 {
			r[corev1.ResourceName(fmt.Sprintf("example.com/device-%02d", i))] = amount
		}
		return r
	}
	for name, c := range map[string]struct {
		a, b  flavors.Resources
		share bool
	}{
		"equal":                 {flavors.Resources{"cpu": 1000, "memory": 1 << 30}, flavors.Resources{"memory": 1 << 30, "cpu": 1000}, true},
		"another amount":        {flavors.Resources{"cpu": 1000}, flavors.Resources{"cpu": 2000}, false},
		"digits moved":          {flavors.Resources{"cpu": 1, "memory": 12}, flavors.Resources{"cpu": 11, "memory": 2}, false},
		"another name":          {flavors.Resources{"cpu": 1}, flavors.Resources{"cpu1": 1}, false},
		"more names than fit":   {many(3), many(3), true},
		"more names, other one": {many(3), many(4), false},
	} {
		if got := same(shareResources(c.a), shareResources(c.b)); got != c.share {
			t.Errorf("%s: shared = %v, want %v", name, got, c.share)
		}
	}
	r := flavors.Resources{"cpu": 500, "memory": 1 << 28, "nvidia.com/gpu": 1000}
	shareResources(r)
	again := maps.Clone(r)
	if n := testing.AllocsPerRun(100, func() { shareResources(again) }); n != 0 {
		t.Errorf("finding a shared map again allocates %v times, want 0", n)
	}
}
