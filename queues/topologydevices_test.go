package queues

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues/deviceclass"
)

// setClass tells f of DeviceClass c, its selectors compiled.
func setClass(f *FlavorDomains, c *resourcev1.DeviceClass) []string {
	return f.SetDeviceClass(c.Name, deviceclass.Compile(c))
}

const (
	drGPU  corev1.ResourceName = "example.com/gpu"
	drFPGA corev1.ResourceName = "example.com/fpga"
)

// devNode is a Ready node of pool a in rack of block b1, with no GPU in
// its allocatable.
func devNode(name, rack string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a", "block": "b1", "rack": rack, "kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// devSlice is a ResourceSlice of driver gpu.example.com on node, of pool
// at generation gen, with devices "name:type" (attribute type of the
// driver's domain).
func devSlice(name, node, pool string, gen int64, devices ...string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: 1}}}
	if node != "" {
		s.Spec.NodeName = ptr.To(node)
	} else {
		s.Spec.AllNodes = ptr.To(true)
	}
	for _, d := range devices {
		n, typ, _ := strings.Cut(d, ":")
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: n,
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": {StringValue: ptr.To(typ)}}})
	}
	return s
}

// devClass is a DeviceClass whose selectors are exprs.
func devClass(name string, exprs ...string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range exprs {
		c.Spec.Selectors = append(c.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return c
}

// byType selects the devices of gpu.example.com of attribute type typ.
func byType(typ string) string {
	return fmt.Sprintf(`device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == %q`, typ)
}

// devices are the devices of pool p on gpu.example.com, by name.
func devices(pool string, names ...string) []DeviceID {
	var out []DeviceID
	for _, n := range names {
		out = append(out, DeviceID{Driver: "gpu.example.com", Pool: pool, Device: n})
	}
	return out
}

// devConfig is topologyConfig with gpu.nvidia.com mapped to
// example.com/gpu and fpga.example.com to example.com/fpga; nic.example.com
// is not mapped.
func devConfig() *Config {
	cfg := topologyConfig()
	cfg.DeviceClasses = map[string]corev1.ResourceName{"gpu.example.com": drGPU, "fpga.example.com": drFPGA}
	return cfg
}

// freeDevices writes what each node has free of the mapped resources, as
// "n1 example.com/gpu=2; n2 ...", in node order.
func freeDevices(f *FlavorDomains) string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(f.devices.free)) {
		out = append(out, n+" "+f.devices.free[n].String())
	}
	return strings.Join(out, "; ")
}

func TestNodeDevices(t *testing.T) {
	classes := []*resourcev1.DeviceClass{devClass("gpu.example.com", byType("gpu")), devClass("fpga.example.com", byType("fpga")), devClass("nic.example.com", byType("nic"))}
	twoKinds := devSlice("n1-gpus", "n1", "n1", 1, "g0:gpu", "g1:gpu", "f0:fpga", "x0:nic")
	for _, tc := range []struct {
		name     string
		steps    func(f *FlavorDomains)
		want     string
		problems []string
	}{{
		name:  "a node counts its devices of each mapped class as the class's resource",
		steps: func(f *FlavorDomains) { f.SetResourceSlice(twoKinds) },
		want:  "n1 example.com/fpga=1, example.com/gpu=2",
	}, {
		name:  "devices of a class no mapping names count as nothing",
		steps: func(f *FlavorDomains) { f.SetResourceSlice(devSlice("n1-nics", "n1", "n1", 1, "x0:nic", "x1:nic")) },
		want:  "",
	}, {
		name: "the slices of a node's pools add up",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(devSlice("n1-a", "n1", "n1-a", 1, "g0:gpu"))
			f.SetResourceSlice(devSlice("n1-b", "n1", "n1-b", 1, "g0:gpu", "g1:gpu"))
			f.SetResourceSlice(devSlice("n2-a", "n2", "n2-a", 1, "g0:gpu"))
		},
		want: "n1 example.com/gpu=3; n2 example.com/gpu=1",
	}, {
		name: "a slice of a pool's old generation does not count, whichever comes first",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(devSlice("new", "n1", "p", 2, "g0:gpu", "g1:gpu"))
			f.SetResourceSlice(devSlice("old", "n1", "p", 1, "g0:gpu", "g1:gpu", "g2:gpu", "g3:gpu"))
		},
		want: "n1 example.com/gpu=2",
	}, {
		name: "a pool's new generation replaces the old one's devices",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(devSlice("old", "n1", "p", 1, "g0:gpu", "g1:gpu", "g2:gpu", "g3:gpu"))
			f.SetResourceSlice(devSlice("new", "n1", "p", 2, "g0:gpu"))
		},
		want: "n1 example.com/gpu=1",
	}, {
		name: "the new generation's slice gone, the old one's counts again",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(devSlice("old", "n1", "p", 1, "g0:gpu", "g1:gpu", "g2:gpu"))
			f.SetResourceSlice(devSlice("new", "n1", "p", 2, "g0:gpu"))
			f.RemoveResourceSlice("new")
		},
		want: "n1 example.com/gpu=3",
	}, {
		name: "a slice updated in place counts as it is now",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(devSlice("s", "n1", "p", 1, "g0:gpu", "g1:gpu"))
			f.SetResourceSlice(devSlice("s", "n1", "p", 1, "g0:gpu", "f0:fpga"))
		},
		want: "n1 example.com/fpga=1, example.com/gpu=1",
	}, {
		name: "a slice deleted takes its devices",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(twoKinds)
			f.RemoveResourceSlice(twoKinds.Name)
		},
		want: "",
	}, {
		name:  "a slice not bound to one node counts on none",
		steps: func(f *FlavorDomains) { f.SetResourceSlice(devSlice("net", "", "net", 1, "g0:gpu")) },
		want:  "",
	}, {
		name: "devices allocated to claims are taken, and given back when the claims are",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(twoKinds)
			f.SetClaim("ns/a", devices("n1", "g0", "f0"))
			f.SetClaim("ns/b", devices("n1", "g1"))
			f.SetClaim("ns/b", nil)
		},
		want: "n1 example.com/gpu=1",
	}, {
		name: "a device two claims share is taken until both give it back",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(twoKinds)
			f.SetClaim("ns/a", devices("n1", "g0"))
			f.SetClaim("ns/b", devices("n1", "g0"))
			f.SetClaim("ns/a", nil)
		},
		want: "n1 example.com/fpga=1, example.com/gpu=1",
	}, {
		name: "a claim allocated before its device's slice is told of takes it once it is",
		steps: func(f *FlavorDomains) {
			f.SetClaim("ns/a", devices("n1", "g0"))
			f.SetResourceSlice(twoKinds)
		},
		want: "n1 example.com/fpga=1, example.com/gpu=1",
	}, {
		name: "a class told of after its devices counts them then",
		steps: func(f *FlavorDomains) {
			f.RemoveDeviceClass("gpu.example.com")
			f.SetResourceSlice(twoKinds)
			if freeDevices(f) != "n1 example.com/fpga=1" {
				panic("the GPUs counted without their class: " + freeDevices(f))
			}
			setClass(f, classes[0])
		},
		want: "n1 example.com/fpga=1, example.com/gpu=2",
	}, {
		name: "a class changed selects what it selects now",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(twoKinds)
			setClass(f, devClass("gpu.example.com", `device.attributes["gpu.example.com"].type in ["gpu", "nic"]`))
		},
		want: "n1 example.com/fpga=1, example.com/gpu=3",
	}, {
		name: "a class without selectors selects every device",
		steps: func(f *FlavorDomains) {
			setClass(f, devClass("fpga.example.com"))
			f.SetResourceSlice(twoKinds)
		},
		want: "n1 example.com/fpga=4, example.com/gpu=2",
	}, {
		name: "a device that classes of two resources select counts in each",
		steps: func(f *FlavorDomains) {
			setClass(f, devClass("fpga.example.com", `device.attributes["gpu.example.com"].type != "nic"`))
			f.SetResourceSlice(twoKinds)
			f.SetClaim("ns/a", devices("n1", "g0"))
		},
		want: "n1 example.com/fpga=2, example.com/gpu=1",
	}, {
		name: "a class whose selector does not compile counts nothing, and says why",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(twoKinds)
			setClass(f, devClass("gpu.example.com", `device.attributes["gpu.example.com"].type ==`))
		},
		want:     "n1 example.com/fpga=1",
		problems: []string{"gpu.example.com: spec.selectors[0].cel.expression does not compile"},
	}, {
		name: "a selector that fails on a device does not count it, and says so",
		steps: func(f *FlavorDomains) {
			setClass(f, devClass("gpu.example.com", `device.attributes["gpu.example.com"].model == "a100"`))
			f.SetResourceSlice(twoKinds)
		},
		want:     "n1 example.com/fpga=1",
		problems: []string{"gpu.example.com: spec.selectors[0].cel.expression failed: no such key: model, on device f0 of pool n1 (driver gpu.example.com) (and on 3 other devices)"},
	}, {
		name: "a class mended says nothing more",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(twoKinds)
			setClass(f, devClass("gpu.example.com", `device.attributes["gpu.example.com"].model == "a100"`))
			setClass(f, classes[0])
		},
		want: "n1 example.com/fpga=1, example.com/gpu=2",
	}, {
		name: "a config without mappings counts no device",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(twoKinds)
			f.Configure(topologyConfig())
		},
		want: "",
	}, {
		name: "a config that maps a class anew counts its devices",
		steps: func(f *FlavorDomains) {
			f.SetResourceSlice(twoKinds)
			cfg := devConfig()
			cfg.DeviceClasses["nic.example.com"] = "example.com/nic"
			f.Configure(cfg)
		},
		want: "n1 example.com/fpga=1, example.com/gpu=2, example.com/nic=1",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlavorDomains()
			f.Configure(devConfig())
			for _, c := range classes {
				setClass(f, c)
			}
			tc.steps(f)
			if diff := cmp.Diff(tc.want, freeDevices(f)); diff != "" {
				t.Errorf("free devices (-want +got):\n%s", diff)
			}
			var problems []string
			for _, p := range f.DeviceClassProblems() {
				problems = append(problems, p.Class+": "+p.Why)
			}
			if len(tc.problems) != len(problems) || (len(problems) > 0 && !strings.HasPrefix(problems[0], tc.problems[0])) {
				t.Errorf("problems %q, want (prefixes of) %q", problems, tc.problems)
			}
		})
	}
}

// TestClaimDevices: a claim holds the devices of its allocation, but
// those with admin access; one the scheduler made for an extended
// resource request holds none (its pod's request counts them).
func TestClaimDevices(t *testing.T) {
	result := func(dev string, admin bool) resourcev1.DeviceRequestAllocationResult {
		r := resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: dev}
		if admin {
			r.AdminAccess = ptr.To(true)
		}
		return r
	}
	claim := func(annotations map[string]string, results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Annotations: annotations}}
		if results != nil {
			c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		claim *resourcev1.ResourceClaim
		want  []DeviceID
	}{
		{"not allocated", claim(nil), nil},
		{"allocated", claim(nil, result("g0", false), result("g1", false)), devices("n1", "g0", "g1")},
		{"with admin access", claim(nil, result("g0", true), result("g1", false)), devices("n1", "g1")},
		{"made for an extended resource", claim(map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}, result("g0", false)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ClaimDevices(StripResourceClaim(tc.claim))); diff != "" {
				t.Errorf("devices of the stripped claim (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDevicesPlaceAGang: a gang of two 8-GPU pods that asks for one rack
// is placed in the rack whose nodes publish the GPUs, and nowhere once
// claims hold them; the devices change what the rack holds at once.
func TestDevicesPlaceAGang(t *testing.T) {
	perPod := flavors.Resources{drGPU: 8, corev1.ResourcePods: 1}
	rack := TopologyRequest{Mode: TopologyRequired, Level: "rack"}
	eight := func(node string) *resourcev1.ResourceSlice {
		var devs []string
		for i := range 8 {
			devs = append(devs, fmt.Sprintf("g%d:gpu", i))
		}
		return devSlice(node, node, node, 1, devs...)
	}
	place := func(f *FlavorDomains) string {
		a, err := f.Trees["gpu"].Place(2, perPod, rack)
		if err != nil {
			return err.Error()
		}
		return placed(a)
	}
	f := NewFlavorDomains()
	f.Configure(devConfig())
	setClass(f, devClass("gpu.example.com", byType("gpu")))
	for _, n := range []string{"n1", "n2", "n3"} {
		f.SetNode(devNode(n, "r1"))
	}
	f.SetNode(devNode("n4", "r2"))
	f.SetNode(devNode("n5", "r2"))
	if got := place(f); !strings.Contains(got, "no rack domain holds 2 pods") {
		t.Fatalf("placed with no device published: %s", got)
	}
	for _, n := range []string{"n1", "n4", "n5"} {
		if qs := f.SetResourceSlice(eight(n)); !slices.Equal(qs, []string{"tas"}) {
			t.Fatalf("a slice of %s changed queues %v, want [tas]", n, qs)
		}
	}
	if qs := f.SetResourceSlice(eight("n1")); qs != nil {
		t.Fatalf("a slice told of again as it was changed queues %v", qs)
	}
	if got, want := place(f), "b1/r2/n4:1 b1/r2/n5:1"; got != want {
		t.Fatalf("placed %s, want %s: only r2 has 16 GPUs", got, want)
	}
	// A pod bound to n5 holds one of its GPUs through its claim.
	f.SetClaim("other/pod-gpu", devices("n5", "g3"))
	if got := place(f); !strings.Contains(got, "no rack domain holds 2 pods") {
		t.Fatalf("placed with a GPU of r2 taken: %s", got)
	}
	f.SetResourceSlice(eight("n2"))
	if got, want := place(f), "b1/r1/n1:1 b1/r1/n2:1"; got != want {
		t.Fatalf("placed %s, want %s once n2 publishes its GPUs", got, want)
	}
	// A held placement of the gang reserves its GPUs, until its pods are
	// bound and their claims allocated.
	w := Owner{Namespace: "ns", UID: "w"}
	a, _ := f.Trees["gpu"].Place(2, perPod, rack)
	f.Hold(w, &Placement{Flavor: "gpu", Sets: []TopologyAssignment{a}, PerPod: []flavors.Resources{perPod}})
	if got := place(f); !strings.Contains(got, "no rack domain holds 2 pods") {
		t.Fatalf("placed again on a held placement: %s", got)
	}
	f.SetPod("ns/w-0", "n1", flavors.Resources{corev1.ResourcePods: 1}, w)
	f.SetClaim("ns/w-0-gpu", devices("n1", "g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"))
	if got := f.Trees["gpu"].Holds([]string{"b1", "r1"}, perPod); got != 0 {
		t.Fatalf("rack r1 holds %d with one pod bound and the other held, want 0", got)
	}
	f.SetClaim("other/pod-gpu", nil)
	if got := f.Trees["gpu"].Holds([]string{"b1", "r2"}, perPod); got != 2 {
		t.Fatalf("rack r2 holds %d once its GPU is given back, want 2", got)
	}
}

// TestNodeDevicesIncremental: after any sequence of slice, class, claim
// and mapping changes, what each node has free is what a nodeDevices
// told of the same objects as they are now, at once, has free.
func TestNodeDevicesIncremental(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	classes := [][]*resourcev1.DeviceClass{
		{devClass("gpu.example.com", byType("gpu")), devClass("gpu.example.com", `device.attributes["gpu.example.com"].type != "nic"`), nil},
		{devClass("fpga.example.com", byType("fpga")), devClass("fpga.example.com", `device.attributes["gpu.example.com"].model == "x"`), nil},
	}
	mappings := []map[string]corev1.ResourceName{
		{"gpu.example.com": drGPU, "fpga.example.com": drFPGA},
		{"gpu.example.com": drGPU},
		{"gpu.example.com": drGPU, "fpga.example.com": drGPU},
	}
	types := []string{"gpu", "fpga", "nic"}
	for run := range 300 {
		d := newNodeDevices()
		slicesNow := map[string]*resourcev1.ResourceSlice{}
		classNow := map[string]*resourcev1.DeviceClass{}
		claimsNow := map[string][]DeviceID{}
		mapped := mappings[0]
		d.setMapped(mapped, changes{})
		var ops []string
		for range 30 {
			switch rng.IntN(5) {
			case 0, 1:
				name := fmt.Sprintf("s%d", rng.IntN(4))
				if rng.IntN(4) == 0 {
					delete(slicesNow, name)
					d.setSlice(name, nil, changes{})
					ops = append(ops, "delete slice "+name)
					continue
				}
				var devs []string
				for i := range 4 {
					if rng.IntN(2) == 0 {
						devs = append(devs, fmt.Sprintf("d%d:%s", i, types[rng.IntN(len(types))]))
					}
				}
				node := fmt.Sprintf("n%d", rng.IntN(3))
				s := devSlice(name, node, fmt.Sprintf("p%d", rng.IntN(2)), int64(1+rng.IntN(3)), devs...)
				slicesNow[name] = s
				d.setSlice(name, s, changes{})
				ops = append(ops, fmt.Sprintf("slice %s on %s pool %s gen %d %v", name, node, s.Spec.Pool.Name, s.Spec.Pool.Generation, devs))
			case 2:
				i := rng.IntN(len(classes))
				c := classes[i][rng.IntN(len(classes[i]))]
				name := classes[i][0].Name
				if c == nil {
					delete(classNow, name)
					d.setClass(name, nil, changes{})
					ops = append(ops, "delete class "+name)
				} else {
					classNow[name] = c
					d.setClass(name, deviceclass.Compile(c), changes{})
					ops = append(ops, "class "+c.Spec.Selectors[0].CEL.Expression)
				}
			case 3:
				key := fmt.Sprintf("ns/c%d", rng.IntN(3))
				var ids []DeviceID
				for range rng.IntN(3) {
					ids = append(ids, DeviceID{Driver: "gpu.example.com", Pool: fmt.Sprintf("p%d", rng.IntN(2)), Device: fmt.Sprintf("d%d", rng.IntN(4))})
				}
				ids = slices.CompactFunc(ids, func(a, b DeviceID) bool { return a == b })
				claimsNow[key] = ids
				d.setClaim(key, ids, changes{})
				ops = append(ops, fmt.Sprintf("claim %s %v", key, ids))
			case 4:
				mapped = mappings[rng.IntN(len(mappings))]
				d.setMapped(mapped, changes{})
				ops = append(ops, fmt.Sprintf("mapped %v", mapped))
			}
		}
		fresh := newNodeDevices()
		fresh.setMapped(mapped, changes{})
		for name, c := range classNow {
			fresh.setClass(name, deviceclass.Compile(c), changes{})
		}
		for _, name := range slices.Sorted(maps.Keys(slicesNow)) {
			fresh.setSlice(name, slicesNow[name], changes{})
		}
		for key, ids := range claimsNow {
			fresh.setClaim(key, ids, changes{})
		}
		if diff := cmp.Diff(fresh.free, d.free); diff != "" {
			t.Fatalf("run %d: free devices told at once (-) and one change at a time (+):\n%s\nafter:\n%s", run, diff, strings.Join(ops, "\n"))
		}
	}
}
