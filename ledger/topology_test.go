package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"tally.dev/tally/flavors"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// nodeTopology is a config of flavor tas, whose topology dc has the
// node as its only level, and extra.
func nodeTopology(t *testing.T, extra string) *queues.Config {
	t.Helper()
	cfg, _, errs := queues.Parse([]byte(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: dc}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tas}
spec: {topologyName: dc}
` + extra))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return cfg
}

// TestDeviceClassNotCounted: a mapped DeviceClass whose selector does
// not compile is warned of on the config ConfigMap once, again when it
// fails otherwise, and not once it is mended; an unmapped class is not
// warned of.
func TestDeviceClassNotCounted(t *testing.T) {
	cfg := nodeTopology(t, `---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
resources:
  deviceClassMappings:
  - {name: example.com/gpu, deviceClassNames: [gpu.example.com]}
`)
	rec := &scenarioRecorder{}
	l := New(nil, nil, queues.NewStore(nil), rec, logr.Discard(), Options{Namespace: "tally-system"})
	l.reconfigure(cfg)
	class := func(name, expr string) *resourcev1.DeviceClass {
		return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}}
	}
	l.onDeviceClass(class("nic.example.com", "device.driver =="))
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("an unmapped class warned of: %q", got)
	}
	l.onDeviceClass(class("gpu.example.com", "device.driver =="))
	got := rec.take()
	if len(got) != 1 || !strings.HasPrefix(got[0], queues.ConfigName+" "+ReasonDeviceClassNotCounted+": DeviceClass gpu.example.com (mapped to example.com/gpu): spec.selectors[0].cel.expression does not compile") {
		t.Fatalf("events %q, want one %s on the config ConfigMap", got, ReasonDeviceClassNotCounted)
	}
	l.onDeviceClass(class("gpu.example.com", "device.driver =="))
	l.onResourceSlice(&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("warned again of the same: %q", got)
	}
	l.onDeviceClass(class("gpu.example.com", "device.nope"))
	if got := rec.take(); len(got) != 1 || !strings.Contains(got[0], "does not compile") {
		t.Fatalf("events %q, want one for the class's new fault", got)
	}
	l.onDeviceClass(class("gpu.example.com", `device.driver == "gpu.example.com"`))
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("a mended class warned of: %q", got)
	}
}

// TestNodeLossWaitsOutOneOutage: a workload placed on a node is moved
// once the node has been unusable for nodeLostAfter without a break: a
// node cordoned and uncordoned again leaves no timer behind, and one
// that goes down again later waits out the whole time anew.
func TestNodeLossWaitsOutOneOutage(t *testing.T) {
	cfg := nodeTopology(t, "")
	clk := &afterClock{FakeClock: clocktesting.NewFakeClock(time.Unix(0, 0))}
	l := New(nil, nil, queues.NewStore(nil), &scenarioRecorder{}, logr.Discard(), Options{Clock: clk})
	l.writer.stop() // the eviction's write is not made: the step is what is checked
	l.reconfigure(cfg)
	node := func(unschedulable, ready bool) *corev1.Node {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1"}},
			Spec: corev1.NodeSpec{Unschedulable: unschedulable},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	}
	l.onNode(node(false, true))
	e := &entry{Entry: machine.New(machine.Admitted)}
	e.W = reactWorkload(2)
	e.Charged = queues.Usage{{Flavor: "tas", Resource: corev1.ResourceCPU}: flavors.Amount(2000)}
	e.ChargedQueue = "q"
	e.placed = &placement{flavor: "tas", sets: []queues.TopologyAssignment{{Levels: []string{corev1.LabelHostname},
		Domains: []queues.DomainCount{{Values: []string{"n1"}, Count: 1}}}}}
	l.mu.Lock()
	l.jobs[e.W.UID] = e
	l.followPlacement(e)
	l.mu.Unlock()
	phase := func() machine.Phase {
		l.mu.Lock()
		defer l.mu.Unlock()
		return e.Phase()
	}

	l.onNode(node(true, true)) // cordoned at 0
	clk.step(5 * time.Second)
	l.onNode(node(false, true)) // uncordoned at 5 s
	if clk.HasWaiters() {
		t.Fatal("a node usable again left its loss's timer set")
	}
	clk.step(20 * time.Second)
	l.onNode(node(false, false)) // not Ready at 25 s
	clk.step(5 * time.Second)
	if p := phase(); p != machine.Admitted {
		t.Fatalf("at 30 s, 5 s into the node's second outage, the workload is %v; want it admitted until %v of it have passed", p, nodeLostAfter)
	}
	clk.step(nodeLostAfter - 5*time.Second)
	if p := phase(); p != machine.Evicting {
		t.Fatalf("after %v of the node's second outage the workload is %v; want it requeued (evicting)", nodeLostAfter, p)
	}
}

// afterClock is a fake clock whose AfterFunc timers, once step passes
// them, run after the step, outside the clock's lock (the fake clock's
// own run under it, where reading the clock would deadlock). A stopped
// timer does not run.
type afterClock struct {
	*clocktesting.FakeClock
	due []func()
}

func (c *afterClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.FakeClock.AfterFunc(d, func() { c.due = append(c.due, f) })
}

func (c *afterClock) step(d time.Duration) {
	c.Step(d)
	due := c.due
	c.due = nil
	for _, f := range due {
		f()
	}
}
