package ledger

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/queues"
)

// TestDeviceClassNotCounted: a mapped DeviceClass whose selector does
// not compile is warned of on the config ConfigMap once, again when it
// fails otherwise, and not once it is mended; an unmapped class is not
// warned of.
func TestDeviceClassNotCounted(t *testing.T) {
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
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
resources:
  deviceClassMappings:
  - {name: example.com/gpu, deviceClassNames: [gpu.example.com]}
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
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
