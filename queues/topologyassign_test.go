package queues

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

func TestTopologyRequestOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ann   map[string]string
		want  *TopologyRequest
		group string
		err   string
	}{
		{"none", nil, nil, "", ""},
		{"required", map[string]string{AnnotationRequiredTopology: "rack"}, &TopologyRequest{Mode: TopologyRequired, Level: "rack"}, "", ""},
		{"preferred", map[string]string{AnnotationPreferredTopology: "block"}, &TopologyRequest{Mode: TopologyPreferred, Level: "block"}, "", ""},
		{"unconstrained", map[string]string{AnnotationUnconstrainedTopology: "true"}, &TopologyRequest{Mode: TopologyUnconstrained}, "", ""},
		{"unconstrained false asks nothing", map[string]string{AnnotationUnconstrainedTopology: "false"}, nil, "", ""},
		{"sliced", map[string]string{AnnotationRequiredTopology: "block", AnnotationSliceRequiredTopology: "rack", AnnotationSliceSize: "4"},
			&TopologyRequest{Mode: TopologyRequired, Level: "block", SliceLevel: "rack", SliceSize: 4}, "", ""},
		{"slices alone spread unconstrained", map[string]string{AnnotationSliceRequiredTopology: "rack", AnnotationSliceSize: "2"},
			&TopologyRequest{Mode: TopologyUnconstrained, SliceLevel: "rack", SliceSize: 2}, "", ""},
		{"grouped", map[string]string{AnnotationRequiredTopology: "rack", AnnotationPodSetGroup: "train"},
			&TopologyRequest{Mode: TopologyRequired, Level: "rack"}, "train", ""},
		{"required and preferred", map[string]string{AnnotationRequiredTopology: "rack", AnnotationPreferredTopology: "block"}, nil, "",
			"metadata.annotations[kueue.x-k8s.io/podset-preferred-topology]: a pod set asks one of"},
		{"required and unconstrained", map[string]string{AnnotationRequiredTopology: "rack", AnnotationUnconstrainedTopology: "true"}, nil, "",
			"metadata.annotations[kueue.x-k8s.io/podset-unconstrained-topology]: a pod set asks one of"},
		{"empty level", map[string]string{AnnotationRequiredTopology: ""}, nil, "",
			"metadata.annotations[kueue.x-k8s.io/podset-required-topology]: empty"},
		{"empty preferred level", map[string]string{AnnotationPreferredTopology: ""}, nil, "",
			"metadata.annotations[kueue.x-k8s.io/podset-preferred-topology]: empty"},
		{"not a bool", map[string]string{AnnotationUnconstrainedTopology: "yes"}, nil, "",
			`metadata.annotations[kueue.x-k8s.io/podset-unconstrained-topology]: "yes" is not true or false`},
		{"slice level without size", map[string]string{AnnotationSliceRequiredTopology: "rack"}, nil, "",
			"metadata.annotations[kueue.x-k8s.io/podset-slice-size]: required with"},
		{"size without slice level", map[string]string{AnnotationSliceSize: "2"}, nil, "",
			"metadata.annotations[kueue.x-k8s.io/podset-slice-size]: set without"},
		{"size not a number", map[string]string{AnnotationSliceRequiredTopology: "rack", AnnotationSliceSize: "two"}, nil, "",
			`metadata.annotations[kueue.x-k8s.io/podset-slice-size]: "two" is not a whole number`},
		{"size zero", map[string]string{AnnotationSliceRequiredTopology: "rack", AnnotationSliceSize: "0"}, nil, "",
			`metadata.annotations[kueue.x-k8s.io/podset-slice-size]: "0" is not a whole number`},
		{"empty slice level", map[string]string{AnnotationSliceRequiredTopology: "", AnnotationSliceSize: "2"}, nil, "",
			"metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology]: empty"},
		{"group without a request", map[string]string{AnnotationPodSetGroup: "train"}, nil, "",
			"metadata.annotations[kueue.x-k8s.io/podset-group-name]: a group's pod sets each ask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, group, err := TopologyRequestOf(tc.ann)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (req == nil) != (tc.want == nil) || req != nil && *req != *tc.want || group != tc.group {
				t.Fatalf("got %+v %q, want %+v %q", req, group, tc.want, tc.group)
			}
		})
	}
}

// topologyConfig is a config of one ClusterQueue, tas, with a flavor
// "gpu" placed in rackTopology and a flavor "plain" without one, each
// of 64 GPUs.
func topologyConfig(flavorsFirst ...string) *Config {
	gpu := flavor("gpu", "pool", "a")
	gpu.TopologyName = rackTopology.Name
	plain := flavor("plain", "pool", "b")
	cq := makeCQ("tas").Group(nvgpu)
	if len(flavorsFirst) == 0 {
		flavorsFirst = []string{"gpu"}
	}
	for _, f := range flavorsFirst {
		cq.Flavor(f, "nvidia.com/gpu=64")
	}
	cfg := makeConfig([]*flavors.Flavor{gpu, plain}, cq.Obj())
	cfg.Topologies = map[string]*Topology{rackTopology.Name: rackTopology}
	return cfg
}

// topologyWL is a workload of n pods of gpus GPUs each, asking req (nil
// for nothing).
func topologyWL(name string, at int, n int64, gpus string, req *TopologyRequest) *Workload {
	b := makeWL(name, "tas", at).Req(nvgpu, gpus).Count(n)
	b.w.PodSets[0].Topology = req
	return b.Obj()
}

func TestDecideWithTopology(t *testing.T) {
	rack := &TopologyRequest{Mode: TopologyRequired, Level: "rack"}
	// Two racks of two 8-GPU nodes each, and a rack of one 4-GPU node.
	dc := "b1/r1/n1=8 b1/r1/n2=8 b1/r2/n3=8 b1/r2/n4=8 b1/r3/n5=4"
	for _, tc := range []struct {
		name    string
		flavors []string
		leaves  string
		pending []*Workload
		// want lists each admitted workload's placement, "name@flavor
		// placement", and part of each waiting one's message, "name:
		// message".
		want []string
	}{
		{"a gang in one rack; the next in the other", nil, dc,
			[]*Workload{topologyWL("a", 1, 4, "4", rack), topologyWL("b", 2, 2, "8", rack)},
			[]string{"a@gpu b1/r1/n1:2 b1/r1/n2:2", "b@gpu b1/r2/n3:1 b1/r2/n4:1"}},
		{"the second gang finds no rack left that holds it", nil, dc,
			[]*Workload{topologyWL("a", 1, 2, "8", rack), topologyWL("b", 2, 2, "8", rack), topologyWL("c", 3, 2, "8", rack)},
			[]string{"a@gpu b1/r1/n1:1 b1/r1/n2:1", "b@gpu b1/r2/n3:1 b1/r2/n4:1",
				`c: fits ClusterQueue tas's quota in flavor gpu, but not its topology: pod set main: topology "dc": no rack domain holds 2 pods; the largest, b1/r1, holds 0`}},
		{"no annotation: unconstrained, each pod on a node that holds it", nil, "b1/r1/n1=7 b1/r1/n2=7 b1/r2/n3=8",
			[]*Workload{topologyWL("a", 1, 2, "8", nil)},
			[]string{`a: fits ClusterQueue tas's quota in flavor gpu, but not its topology: pod set main: topology "dc": its kubernetes.io/hostname domains hold 1 of 2 pods in all`}},
		{"no annotation fits where nodes have room", nil, "b1/r1/n1=8 b1/r1/n2=7 b1/r2/n3=8",
			[]*Workload{topologyWL("a", 1, 2, "8", nil)},
			[]string{"a@gpu b1/r1/n1:1 b1/r2/n3:1"}},
		{"a flavor whose topology does not hold it is passed for the next", []string{"gpu", "plain"}, "b1/r1/n1=4",
			[]*Workload{topologyWL("a", 1, 2, "4", nil)},
			[]string{"a@plain "}},
		{"a request for a placement skips a flavor without a topology", []string{"plain", "gpu"}, dc,
			[]*Workload{topologyWL("a", 1, 2, "4", rack)},
			[]string{"a@gpu b1/r1/n1:2"}},
		{"a request for a placement never fits where no flavor has a topology", []string{"plain"}, dc,
			[]*Workload{topologyWL("a", 1, 2, "4", rack)},
			[]string{"a: asks where in a topology its pods go"}},
		{"a level the topology does not have never fits", nil, dc,
			[]*Workload{topologyWL("a", 1, 1, "1", &TopologyRequest{Mode: TopologyRequired, Level: "zone"})},
			[]string{"a: flavor gpu cannot place the Job"}},
		{"no nodes yet: waits", nil, "",
			[]*Workload{topologyWL("a", 1, 1, "1", rack)},
			[]string{`a: fits ClusterQueue tas's quota in flavor gpu, but not its topology`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := topologyConfig(tc.flavors...)
			snap := NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}})
			snap.Domains = map[string]*Domains{}
			if tc.leaves != "" {
				snap.Domains["gpu"] = NewDomains(rackTopology, leaves(tc.leaves))
			}
			var got []string
			d := Decide(snap, seqs(tc.pending...), func(w *Workload, v Verdict, _ int) {
				if v.Kind != Fits {
					got = append(got, w.Name+": "+v.Message())
				}
			})
			for _, a := range d.Admissions {
				var p []string
				for _, ta := range a.Assignment.Topology {
					p = append(p, placed(ta))
				}
				got = append(got, a.Workload.Name+"@"+strings.Join(a.Assignment.Flavors, "+")+" "+strings.Join(p, ";"))
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					if name, rest, _ := strings.Cut(w, " "); strings.HasPrefix(g, name) && strings.Contains(g, rest) {
						found = true
					}
				}
				if !found {
					t.Errorf("got %q, want one like %q", got, w)
				}
			}
		})
	}
}

func TestNoDomainsPlacesNothing(t *testing.T) {
	snap := NewSnapshot(topologyConfig(), nil, map[string]labels.Set{"ns": {}})
	a, v := snap.Assign(topologyWL("a", 1, 2, "4", &TopologyRequest{Mode: TopologyRequired, Level: "rack"}))
	if v.Kind != Fits || a.Topology != nil {
		t.Fatalf("without Domains: %v, placed %v; want admitted by quota, placed nowhere", v.Message(), a.Topology)
	}
}

func TestTopologyAnnotationRoundTrip(t *testing.T) {
	cfg := topologyConfig()
	w := topologyWL("a", 1, 4, "4", &TopologyRequest{Mode: TopologyRequired, Level: "rack"})
	snap := NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}})
	snap.Domains = map[string]*Domains{"gpu": NewDomains(rackTopology, leaves("b1/r1/n1=8 b1/r1/n2=8"))}
	a, v := snap.Assign(w)
	if v.Kind != Fits {
		t.Fatal(v.Message())
	}
	ann := a.TopologyAnnotation(w)
	if want := "gpu;main=b1/r1/n1:2,b1/r1/n2:2"; ann != want {
		t.Fatalf("annotation %q, want %q", ann, want)
	}
	fl, sets, err := ParseTopologyAnnotation(cfg, w, ann)
	if err != nil || fl != "gpu" || len(sets) != 1 || placed(sets[0]) != "b1/r1/n1:2 b1/r1/n2:2" {
		t.Fatalf("parsed %q %+v %v", fl, sets, err)
	}
	if got := sets[0].Pinned(); len(got) != 2 || got["block"] != "b1" || got["rack"] != "r1" {
		t.Fatalf("pinned %v, want block and rack", got)
	}
	for _, bad := range []string{"plain;main=b1/r1/n1:2", "gpu;worker=b1/r1/n1:2", "gpu;main=b1/r1:2", "gpu;main=b1/r1/n1:0", "gpu;main=b1/r1/n1"} {
		if _, _, err := ParseTopologyAnnotation(cfg, w, bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPinned(t *testing.T) {
	levels := rackTopology.Levels
	for _, tc := range []struct {
		domains []DomainCount
		want    string
	}{
		{nil, ""},
		// Not the node: the gate gives each pod its node.
		{[]DomainCount{{Values: []string{"b1", "r1", "n1"}, Count: 2}}, "block=b1,rack=r1"},
		{[]DomainCount{{Values: []string{"b1", "r1", "n1"}, Count: 2}, {Values: []string{"b1", "r1", "n2"}, Count: 1}}, "block=b1,rack=r1"},
		{[]DomainCount{{Values: []string{"b1", "r1", "n1"}, Count: 2}, {Values: []string{"b1", "r2", "n3"}, Count: 1}}, "block=b1"},
		{[]DomainCount{{Values: []string{"b1", "r1", "n1"}, Count: 2}, {Values: []string{"b2", "r2", "n3"}, Count: 1}}, ""},
	} {
		got := labels.Set(TopologyAssignment{Levels: levels, Domains: tc.domains}.Pinned()).String()
		if got != tc.want {
			t.Errorf("%v: pinned %q, want %q", tc.domains, got, tc.want)
		}
	}
	// Leaves that are racks are pinned whole.
	racks := TopologyAssignment{Levels: []string{"block", "rack"}, Domains: []DomainCount{{Values: []string{"b1", "r1"}, Count: 2}}}
	if got := labels.Set(racks.Pinned()).String(); got != "block=b1,rack=r1" {
		t.Errorf("a rack leaf: pinned %q, want block=b1,rack=r1", got)
	}
}

func TestReserve(t *testing.T) {
	d := NewTopologyDomains(rackTopology)
	d.SetNode("n1", []string{"b1", "r1", "n1"}, flavors.Resources{nvgpu: 8, "pods": 110})
	gpu := flavors.Resources{nvgpu: 1}
	d.Reserve([]string{"b1", "r1", "n1"}, PodsOf(gpu, 6), +1)
	if _, err := d.Place(3, gpu, TopologyRequest{Mode: TopologyRequired, Level: "rack"}); err == nil {
		t.Fatal("3 pods placed where 2 GPUs are left")
	}
	// The reservation outlives the node: a node back in the leaf has it.
	d.RemoveNode("n1")
	d.SetNode("n1", []string{"b1", "r1", "n1"}, flavors.Resources{nvgpu: 8, "pods": 110})
	if _, err := d.Place(3, gpu, TopologyRequest{Mode: TopologyRequired, Level: "rack"}); err == nil {
		t.Fatal("3 pods placed where 2 GPUs are left, after the node came back")
	}
	if _, err := d.Place(2, gpu, TopologyRequest{Mode: TopologyRequired, Level: "rack"}); err != nil {
		t.Fatal(err)
	}
	d.Reserve([]string{"b1", "r1", "n1"}, PodsOf(gpu, 6), -1)
	if _, err := d.Place(8, gpu, TopologyRequest{Mode: TopologyRequired, Level: "rack"}); err != nil {
		t.Fatal(err)
	}
	if len(d.reserved) != 0 {
		t.Fatalf("reservations left: %v", d.reserved)
	}
}

// TestNodeFitFragmentation: two 8-GPU pods on a flavor whose three
// nodes have 7, 7 and 8 GPUs free fit its 22 GPUs of quota but no two
// nodes; without node-level fit the workload is admitted and one pod
// sits Pending while it holds the quota, with tally.dev/node-fit it
// waits, saying so, until a node has room.
func TestNodeFitFragmentation(t *testing.T) {
	for _, tc := range []struct {
		ann  string
		want string
	}{
		{"", "admitted"},
		{`tally.dev/node-fit: "true"`, `its kubernetes.io/hostname domains hold 1 of 2 pods in all`},
	} {
		cfg := flavorConfig(t, tc.ann, 22)
		f := NewFlavorDomains()
		f.Configure(cfg)
		for i, free := range []int64{7, 7, 8} {
			f.SetNode(poolNode(fmt.Sprintf("n%d", i), free, ""))
		}
		snap := NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}})
		snap.Domains = f.Trees
		w := makeWL("train", "tas", 1).Req(nvgpu, "8").Count(2).Obj()
		got := "admitted"
		if _, v := snap.Assign(w); v.Kind != Fits {
			got = v.Message()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("annotations {%s}: %q, want %q", tc.ann, got, tc.want)
		}
		if tc.ann == "" {
			continue
		}
		// n0 gets a GPU back (its allocatable grows): both pods fit.
		f.SetNode(poolNode("n0", 8, ""))
		if a, v := snap.Assign(w); v.Kind != Fits || len(a.Topology) != 1 || placed(a.Topology[0]) != "n0:1 n2:1" {
			t.Errorf("with n0 at 8 free: %s, placed %v; want n0 and n2", v.Message(), a.Topology)
		}
	}
}

// TestPreemptForADomain: racks r1 and r2 of 4 GPUs each are full, with
// two 2-GPU workloads each. A gang of 4 pods of priority 10 that asks for
// one rack preempts the two workloads of one rack, freeing it (the rack
// of the lowest-priority, newest victim, as the victims are tried in
// that order), never the two of priority 0 on both racks, which would
// free 4 GPUs of quota and no rack; where no rack can be freed by
// victims it may preempt, it preempts nothing.
func TestPreemptForADomain(t *testing.T) {
	one := flavors.Resources{nvgpu: 1}
	rack := &TopologyRequest{Mode: TopologyRequired, Level: "rack"}
	for _, tc := range []struct {
		name string
		// prios of the workloads on r1 (l1, l2) and r2 (l3, l4).
		prios [4]int32
		want  string
		// placed is where the gang goes once its victims are gone (the
		// room its claim holds).
		placed string
	}{
		{"the two of one rack", [4]int32{0, 5, 0, 5}, "l3,l4", "b1/r2/n3:2,b1/r2/n4:2"},
		{"the lowest rack", [4]int32{0, 0, 5, 5}, "l1,l2", "b1/r1/n1:2,b1/r1/n2:2"},
		{"the rack of the newest of the lowest", [4]int32{5, 5, 0, 0}, "l3,l4", "b1/r2/n3:2,b1/r2/n4:2"},
		{"none it may preempt frees a rack", [4]int32{0, 20, 20, 0}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := topologyConfig()
			cfg.ClusterQueues["tas"].Preemption.WithinClusterQueue = PreemptLowerPriority
			f := NewFlavorDomains()
			f.Configure(cfg)
			for i, n := range []string{"n1", "n2", "n3", "n4"} {
				node := rackNode(n, "a", 2, true)
				node.Labels["rack"] = []string{"r1", "r1", "r2", "r2"}[i]
				node.Labels["pool"] = "a"
				f.SetNode(node)
			}
			var admitted []*Admitted
			usage := Usage{}
			for i, name := range []string{"l1", "l2", "l3", "l4"} {
				r, n := []string{"r1", "r1", "r2", "r2"}[i], []string{"n1", "n2", "n3", "n4"}[i]
				w := makeWL(name, "tas", i).Req(nvgpu, "1").Count(2).Prio(tc.prios[i]).Obj()
				p := &Placement{Flavor: "gpu", PerPod: []flavors.Resources{one},
					Sets: []TopologyAssignment{{Levels: rackTopology.Levels, Domains: []DomainCount{{Values: []string{"b1", r, n}, Count: 2}}}}}
				f.Hold(Owner{Namespace: "ns", UID: name}, p)
				u := Usage{{"gpu", nvgpu}: amt(nvgpu, "2")}
				usage.Add(u)
				admitted = append(admitted, &Admitted{W: w, Usage: u, AdmittedAt: epoch.Add(time.Duration(i) * time.Second), Placement: p})
			}
			cfg.ClusterQueues["tas"].ResourceGroups[0].Flavors[0].Quotas[nvgpu] = Quota{Nominal: amt(nvgpu, "8"), BorrowingLimit: flavors.Unlimited, LendingLimit: flavors.Unlimited}
			snap := snapshotOf(cfg, admitted)
			snap.Domains = f.Trees
			gang := makeWL("gang", "tas", 10).Req(nvgpu, "1").Count(4).Prio(10).Obj()
			gang.PodSets[0].Topology = rack
			d := Decide(snap, seqs(gang), ignoreVerdicts)
			names := victimNames(d)
			slices.Sort(names)
			if got := strings.Join(names, ","); got != tc.want {
				t.Fatalf("victims %q, want %q", got, tc.want)
			}
			if len(d.Preemptions) == 0 {
				return
			}
			a := d.Preemptions[0].Assignment
			if got, want := a.TopologyAnnotation(gang), "gpu;main="+tc.placed; got != want || a.TopologyFlavor() != "gpu" {
				t.Errorf("the gang's placement once its victims are gone: %q in flavor %q, want %q", got, a.TopologyFlavor(), want)
			}
		})
	}
}

func ignoreVerdicts(*Workload, Verdict, int) {}

func TestTopologyLeafFor(t *testing.T) {
	cfg := topologyConfig()
	ann := "gpu;master=b1/r1/n1:1;worker=b1/r1/n1:1,b1/r2/n3:2"
	if !Spread(cfg, ann, "worker") || !Spread(cfg, ann, "master") || !Spread(cfg, ann, "") || Spread(cfg, "plain;main=x:1", "") {
		t.Fatal("Spread: want worker (two leaves), master (one node) and any, not a flavor without a topology")
	}
	racks := TopologyAssignment{Levels: []string{"block", "rack"}, Domains: []DomainCount{{Values: []string{"b1", "r1"}, Count: 2}}}
	if racks.Gated() || racks.NextLeaf(nil) != nil {
		t.Fatal("a pod set in one rack, where racks are the leaves, is gated: its template pins it")
	}
	if !(TopologyAssignment{Levels: racks.Levels, Domains: []DomainCount{{Values: []string{"b1", "r1"}, Count: 2}, {Values: []string{"b1", "r2"}, Count: 1}}}).Gated() {
		t.Fatal("a pod set in two racks, where racks are the leaves, is not gated")
	}
	_, sets, err := ParseTopologyAnnotation(cfg, &Workload{PodSets: []PodSet{{Name: "master"}, {Name: "worker"}}}, ann)
	if err != nil {
		t.Fatal(err)
	}
	master, worker := sets[0], sets[1]
	has := map[string]int32{}
	var got []string
	for range 4 {
		sel := worker.NextLeaf(has)
		leaf := worker.LeafOf(sel)
		if sel != nil {
			has[leaf]++
		}
		got = append(got, leaf)
	}
	if want := "b1/r1/n1 b1/r2/n3 b1/r2/n3 "; strings.Join(got, " ") != want {
		t.Fatalf("leaves given %q, want %q (then none: every leaf has its count)", strings.Join(got, " "), want)
	}
	if got := master.LeafOf(master.NextLeaf(nil)); got != "b1/r1/n1" {
		t.Fatalf("the pod of a pod set on one node is given leaf %q, want its node b1/r1/n1", got)
	}
	if worker.LeafOf(map[string]string{"block": "b1", "rack": "r1"}) != "" {
		t.Fatal("a nodeSelector without every level names a leaf")
	}
}
