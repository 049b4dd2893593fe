package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
	"tally.dev/tally/e2e/perf/scenario"
)

// The GPU training example on nodes that an autoscaler makes: a kwok
// cluster of its own with no GPU node (one CPU node), Karpenter with its
// KWOK provider (e2e/cluster/karpenter.sh) and a NodePool of GPU instance
// types whose nodes carry the label and taint of the example's flavor,
// the training operator, and tally with the GPU training example's
// manifests as its config. The rows share the cluster, one after the
// other; each starts once Karpenter has removed the nodes of the one
// before. What is checked is the pods and the nodes.
func TestKarpenter(t *testing.T) {
	s := setup(t)
	build := testContext(t, 20*time.Minute)
	if err := s.env.BuildTool(build, framework.Karpenter); err != nil {
		t.Skipf("Karpenter (sigs.k8s.io/karpenter/kwok) cannot be built into the toolchain %s, so its rows do not run: %v", s.env.Tools, err)
	}
	ctx := testContext(t, 25*time.Minute)
	k := startKarpenterCluster(ctx, t, s.env)
	const ns, localQueue, queue = "team-a", "team-a-queue", "cluster-queue-a"
	bindByLocalQueue(ctx, t, k, ns, localQueue)
	applyExamplePriorityClasses(ctx, t, k)
	rec := recordPyTorchJobs(ctx, t, k, ns)
	nodes, err := framework.WatchKarpenter(ctx, k.client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nodes.Stop(); err != nil {
			t.Errorf("watching nodes: %v", err)
		}
		// No write of tally's, whatever its field manager
		// (queues.FieldManager*, or the client's default "tally"), ever
		// touched a node.
		if w := nodes.NodeWriters("tally"); len(w) > 0 {
			t.Errorf("tally wrote to nodes: %s", strings.Join(w, "; "))
		}
		t.Logf("%d nodes seen; none written by tally (watch re-lists: %d)", nodes.NodesSeen(), nodes.Gaps())
	})
	if gpu := gpuNodes(ctx, t, k.client); len(gpu) > 0 {
		t.Fatalf("GPU nodes before any PyTorchJob: %v", gpu)
	}

	t.Run("the GPU training example's PyTorchJob runs on nodes Karpenter makes, which it then removes", func(t *testing.T) {
		example, err := framework.ReadObject(filepath.Join(k.env.Root, "examples", "gpu-training", "pytorch-job.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := k.client.Create(ctx, example); err != nil {
			t.Fatalf("creating the GPU training example's PyTorchJob: %v", err)
		}
		checkQueued(t, example, queue)
		done := waitPyTorchJobs(ctx, t, k.client, ns, []string{example.GetName()}, 3*time.Minute)[0]
		pods := rec.Pods(example.GetName())
		if len(pods) != 4 {
			t.Errorf("the GPU training example's PyTorchJob made pods %v, want 4 (1 master, 3 workers)", pods)
		}
		admitted := admittedAt(t, rec, example.GetName())
		for pod, name := range pods {
			n := &corev1.Node{}
			if err := k.client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				t.Errorf("pod %s: node %q: %v", pod, name, err)
				continue
			}
			if n.Labels[framework.LabelNodePool] != karpenterNodePool || n.Labels[exampleFlavorLabel] != "true" || n.CreationTimestamp.Time.Before(admitted.Truncate(time.Second)) {
				t.Errorf("pod %s ran on node %s (labels %v, made %s, PyTorchJob admitted %s): want a node Karpenter made for it in NodePool %s with %s=true",
					pod, n.Name, n.Labels, n.CreationTimestamp.Format(time.RFC3339), admitted.Format(time.RFC3339Nano), karpenterNodePool, exampleFlavorLabel)
			}
		}
		t.Logf("%s Succeeded on Karpenter's nodes %v; flavors %s", example.GetName(), pods, done.GetAnnotations()[framework.AnnotationFlavors])
		start := time.Now()
		waitNoKarpenterNodes(ctx, t, k.client)
		t.Logf("Karpenter removed its empty nodes %s after the PyTorchJob Succeeded", time.Since(start).Round(time.Millisecond))
	})

	t.Run("no node for the PyTorchJob that waits", func(t *testing.T) {
		waitNoKarpenterNodes(ctx, t, k.client)
		before, err := framework.ListPyTorchJobs(ctx, k.client, ns)
		if err != nil {
			t.Fatal(err)
		}
		// Three PyTorchJobs of 4 GPUs (a master and three workers, 1 GPU
		// each) in the GPU training example's 10-GPU ClusterQueue: two
		// fit, one waits.
		created := time.Now()
		var names []string
		for i := range 3 {
			pj := framework.NewPyTorchJob(ns, fmt.Sprintf("train-%d", i)).Workers(3).Runtime(15*time.Second).
				Label(framework.LabelKueueQueueName, localQueue).Obj()
			if err := k.client.Create(ctx, pj); err != nil {
				t.Fatal(err)
			}
			checkQueued(t, pj, queue)
			names = append(names, pj.GetName())
		}
		quota := make(chan framework.PodQuotaReport, 1)
		go func() {
			quota <- framework.WatchPodQuota(ctx, k.client, ns, 10, len(before)+len(names), 100*time.Millisecond, 4*time.Minute)
		}()
		// Two run (8 pods Running on Karpenter's nodes) while the third is
		// suspended.
		var waiting string
		var running time.Time
		err = framework.Poll(ctx, 100*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			n, suspended, err := runningOnKarpenter(ctx, k.client, karpenterNodePool, ns, names)
			if err != nil {
				return false, err.Error(), nil
			}
			if n == 8 && len(suspended) == 1 {
				waiting, running = suspended[0], time.Now()
				return true, "", nil
			}
			return false, fmt.Sprintf("%d pods Running on Karpenter's nodes; suspended: %v", n, suspended), nil
		})
		if err != nil {
			t.Fatalf("two PyTorchJobs did not start on Karpenter's nodes while the third waited: %v", err)
		}
		// The one that waits is admitted once one of the two finishes.
		var admitted time.Time
		err = framework.Poll(ctx, 100*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			for _, o := range rec.Observations() {
				if o.Job == waiting && o.Kind == framework.Unsuspended {
					admitted = o.At
					return true, "", nil
				}
			}
			return false, waiting + " not admitted yet", nil
		})
		if err != nil {
			t.Fatalf("the PyTorchJob that waited: %v", err)
		}
		if peak := nodes.PeakGPUs(created, admitted); peak > 8 {
			t.Errorf("while %s waited, Karpenter's nodes had %d GPUs at once; the two admitted PyTorchJobs need 8", waiting, peak)
		}
		if made := nodes.ClaimsSeen(running, admitted); len(made) > 0 {
			t.Errorf("Karpenter made NodeClaims %v while %s waited, after the two admitted ran", made, waiting)
		}
		t.Logf("%s waited %s (with 8 pods Running for %s); Karpenter's nodes had at most %d GPUs meanwhile",
			waiting, admitted.Sub(created).Round(time.Millisecond), admitted.Sub(running).Round(time.Millisecond), nodes.PeakGPUs(created, admitted))
		rep := <-quota
		for _, v := range rep.Violations {
			t.Errorf("all-or-nothing admission within quota broken: %s", v)
		}
		if rep.Err != nil {
			t.Fatalf("the PyTorchJobs did not all finish: %v", rep.Err)
		}
		waitPyTorchJobs(ctx, t, k.client, ns, names, time.Minute)
		for _, name := range names {
			checkOnKarpenterNodes(ctx, t, k.client, rec, name)
		}
		waitNoKarpenterNodes(ctx, t, k.client)
	})

	t.Run("a flavor Karpenter cannot make: timed out, requeued, set aside", func(t *testing.T) {
		// The GPU training example's config with Kueue's waitForPodsReady
		// pasted in, and a flavor whose label no NodePool gives.
		docs := exampleDocs(t, k.env.Root)
		if err := framework.ApplyConfig(ctx, k.client, tallyNamespace, strings.Join(append(docs, unmakeableDocs), "\n---\n")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := framework.ApplyConfig(ctx, k.client, tallyNamespace, strings.Join(docs, "\n---\n")); err != nil {
				t.Errorf("restoring the GPU training example's config: %v", err)
			}
		})
		if err := framework.WaitClusterQueues(ctx, k.client, 30*time.Second, "karpenter-a100"); err != nil {
			t.Fatal(err)
		}
		// The config's Warning about the flavor comes before any workload
		// uses it.
		err := framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
			msgs := reasons(ctx, t, k.client, tallyNamespace, "tally-config", "FlavorUnhostable")
			for _, m := range msgs {
				if strings.HasPrefix(m, "ResourceFlavor a100-flavor ") && strings.Contains(m, "none of the 1 NodePools can make one") {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("FlavorUnhostable Events %q", msgs), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		const ns = "team-a100"
		if err := framework.BindNamespace(ctx, k.client, ns, "karpenter-a100"); err != nil {
			t.Fatal(err)
		}
		since := time.Now()
		pj := framework.NewPyTorchJob(ns, "a100").Runtime(time.Minute).Obj()
		if err := k.client.Create(ctx, pj); err != nil {
			t.Fatal(err)
		}
		err = framework.Poll(ctx, 200*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			u, err := getPyTorchJob(ctx, k.client, ns, "a100")
			if err != nil {
				return false, err.Error(), nil
			}
			state := u.GetLabels()[framework.LabelState]
			return state == "inadmissible", fmt.Sprintf("state %s, requeues %q", state, u.GetAnnotations()["tally.dev/requeues"]), nil
		})
		if err != nil {
			t.Fatalf("the PyTorchJob in a flavor Karpenter cannot make was not set aside: %v", err)
		}
		msgs := reasons(ctx, t, k.client, ns, "a100", "Evicted")
		if len(msgs) != 2 || !strings.HasPrefix(msgs[0], "PodsReadyTimeout: 0 of 1 pods ready") ||
			!strings.Contains(msgs[1], "set aside as inadmissible (its pods did not start in flavor a100-flavor)") {
			t.Errorf("Evicted Events %q", msgs)
		}
		if made := nodes.ClaimsSeen(since, time.Now()); len(made) > 0 {
			t.Errorf("Karpenter made NodeClaims %v for a flavor its NodePool cannot make", made)
		}
		checkNoPodRuns(ctx, t, k.client, ns)
	})

	t.Run("admission to Running on new nodes", func(t *testing.T) {
		// Two waves of five PyTorchJobs (2 pods of 1 GPU each: five fill
		// the 10-GPU queue), each wave on an empty pool, so that every
		// pod waits for a node Karpenter makes for it. Each pod runs 10s,
		// so that a PyTorchJob's two pods, which start a moment apart, are
		// Running together for long enough to be seen by the poll below,
		// also on a loaded machine (with 1s, a poll could miss both).
		const waves, perWave, podRuntime = 2, 5, 10 * time.Second
		var lat []time.Duration
		for wave := range waves {
			waitNoKarpenterNodes(ctx, t, k.client)
			var names []string
			for i := range perWave {
				name := fmt.Sprintf("step-%d-%d", wave, i)
				pj := framework.NewPyTorchJob(ns, name).Workers(1).GPUs(1).Runtime(podRuntime).
					Label(framework.LabelKueueQueueName, localQueue).Obj()
				if err := k.client.Create(ctx, pj); err != nil {
					t.Fatal(err)
				}
				names = append(names, name)
			}
			admitted, running := map[string]time.Time{}, map[string]time.Time{}
			err := framework.Poll(ctx, 50*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
				for _, o := range rec.Observations() {
					if _, seen := admitted[o.Job]; !seen && o.Kind == framework.Unsuspended && slices.Contains(names, o.Job) {
						admitted[o.Job] = o.At
					}
				}
				for _, name := range names {
					if _, ok := admitted[name]; !ok || !running[name].IsZero() {
						continue
					}
					n, _, err := runningOnKarpenter(ctx, k.client, karpenterNodePool, ns, []string{name})
					if err != nil {
						return false, err.Error(), nil
					}
					if n == 2 {
						running[name] = time.Now()
					}
				}
				return len(running) == len(names), fmt.Sprintf("%d admitted, %d with both pods Running on Karpenter's nodes", len(admitted), len(running)), nil
			})
			if err != nil {
				t.Fatalf("wave %d: %v", wave, err)
			}
			for _, name := range names {
				lat = append(lat, running[name].Sub(admitted[name]))
			}
			waitPyTorchJobs(ctx, t, k.client, ns, names, time.Minute)
		}
		t.Logf("admission -> all pods Running on nodes Karpenter made for them, over %d PyTorchJobs (2 pods of 1 GPU each, %d at a time): p50 %s, max %s (all: %v)",
			len(lat), perWave, scenario.Percentile(lat, 50).Round(time.Millisecond), scenario.Percentile(lat, 100).Round(time.Millisecond), roundAll(lat))
		waitNoKarpenterNodes(ctx, t, k.client)
	})

	t.Run("node-level fit counts the nodes a NodePool can still make", func(t *testing.T) {
		// NodePool fit makes 8-GPU nodes, 16 GPUs in all (spec.limits),
		// for flavor fit-flavor, placed at the node level
		// (tally.dev/node-fit), whose ClusterQueue has 64 GPUs of quota.
		// With no node yet, the first PyTorchJob (a master and a worker
		// of 8 GPUs) is admitted on the room the NodePool can make, and
		// Karpenter makes its nodes. The second fits the quota but not
		// that room: it waits, its pods not made, until the first ends,
		// and then runs on the nodes made for the first.
		const ns = "team-fit"
		withNodePool(ctx, t, k, fitDocs, framework.NodePool{Name: "fit", NodeClass: "default", InstanceTypes: []string{"gpu-8x-amd64-linux"},
			Labels: map[string]string{"e2e-fit": "true"}, ConsolidateAfter: time.Minute,
			Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("16")}}, "karpenter-fit", ns)
		rec := recordPyTorchJobs(ctx, t, k, ns)
		since := time.Now()
		// The second is made once the first is admitted, so that the
		// first is the one admitted.
		for _, name := range []string{"first", "second"} {
			if err := k.client.Create(ctx, framework.NewPyTorchJob(ns, name).Workers(1).GPUs(8).Runtime(20*time.Second).Obj()); err != nil {
				t.Fatal(err)
			}
			if name == "second" {
				break
			}
			err := framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
				u, err := getPyTorchJob(ctx, k.client, ns, name)
				if err != nil {
					return false, err.Error(), nil
				}
				return !framework.PyTorchJobSuspended(u), "suspended", nil
			})
			if err != nil {
				t.Fatalf("PyTorchJob %s was not admitted on the room NodePool fit can make: %v", name, err)
			}
		}
		// The first runs on two nodes Karpenter made; the second waits,
		// suspended, with no pod.
		const why = "fits ClusterQueue karpenter-fit's quota in flavor fit-flavor, but not its topology"
		err := framework.Poll(ctx, 200*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			n, suspended, err := runningOnKarpenter(ctx, k.client, "fit", ns, []string{"first"})
			if err != nil {
				return false, err.Error(), nil
			}
			evs, err := framework.WorkloadEvents(ctx, k.client, ns, framework.PyTorchJobGVK.Kind, "Pending")
			if err != nil {
				return false, err.Error(), nil
			}
			waits := slices.ContainsFunc(evs["second"], func(e corev1.Event) bool { return strings.Contains(e.Message, why) })
			return n == 2 && len(suspended) == 0 && waits, fmt.Sprintf("first: %d pods Running on Karpenter's nodes; second's Pending Events %v", n, evs["second"]), nil
		})
		if err != nil {
			t.Fatalf("the first PyTorchJob did not run on nodes Karpenter made while the second waited: %v", err)
		}
		var pods corev1.PodList
		if err := k.client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			if owner := framework.Owner(&pods.Items[i], framework.PyTorchJobGVK.Kind); owner == "second" {
				t.Fatalf("pod %s of the second PyTorchJob exists while the first holds the NodePool's room", pods.Items[i].Name)
			}
		}
		// Both pods on nodes NodePool fit makes.
		checkTopologyAnnotation(ctx, t, k.client, ns, "first", "fit-flavor;master=@fit:1;worker=@fit:1")
		waitPyTorchJobs(ctx, t, k.client, ns, []string{"first", "second"}, 3*time.Minute)
		made := nodes.ClaimsSeen(since, time.Now())
		if len(made) != 2 {
			t.Errorf("Karpenter made NodeClaims %v, want 2: the second PyTorchJob runs on the nodes made for the first", made)
		}
		byJob := map[string][]string{}
		for _, name := range []string{"first", "second"} {
			for pod, node := range rec.Pods(name) {
				n := &corev1.Node{}
				if err := k.client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
					t.Errorf("pod %s: node %q: %v", pod, node, err)
					continue
				}
				if n.Labels[framework.LabelNodePool] != "fit" {
					t.Errorf("pod %s ran on node %s (labels %v), want a node of NodePool fit", pod, node, n.Labels)
				}
				byJob[name] = append(byJob[name], node)
			}
			slices.Sort(byJob[name])
		}
		if len(byJob["first"]) != 2 || !slices.Equal(byJob["first"], byJob["second"]) {
			t.Errorf("pods ran on %v, want each PyTorchJob's two pods on the two nodes made for the first", byJob)
		}
		t.Logf("NodeClaims %v; pods on %v", made, byJob)
	})

	t.Run("a zonal NodePool's room counts in its zone", func(t *testing.T) {
		// Flavor zone-flavor has a Topology of zone and node. NodePool
		// zone-b names one zone, test-zone-b, so what it can still make
		// counts in that zone's domain. With no node yet, a PyTorchJob
		// whose master and worker ask for one zone is admitted there,
		// and Karpenter makes its two nodes in test-zone-b. A pod an
		// ordinary user dresses as its master is never bound beside
		// both of its pods.
		const ns = "team-zone"
		withNodePool(ctx, t, k, zoneDocs, framework.NodePool{Name: "zone-b", NodeClass: "default", InstanceTypes: []string{"gpu-8x-amd64-linux"},
			Labels: map[string]string{"e2e-zone": "true"}, ConsolidateAfter: time.Minute,
			Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-b"}}},
			Limits:       corev1.ResourceList{framework.ResourceGPU: resource.MustParse("24")}}, "karpenter-zone", ns)
		grantEdit(ctx, t, k, ns, integrityUser)
		user, err := framework.NewUserClient(k.cluster.Kubeconfig, integrityUser)
		if err != nil {
			t.Fatal(err)
		}
		rec := recordPyTorchJobs(ctx, t, k, ns)
		if err := k.client.Create(ctx, framework.NewPyTorchJob(ns, "zonal").Workers(1).GPUs(8).Runtime(20*time.Second).
			TemplateAnnotation("kueue.x-k8s.io/podset-required-topology", corev1.LabelTopologyZone).Obj()); err != nil {
			t.Fatal(err)
		}
		// Both pods bound, on nodes NodePool zone-b made in its zone
		// (read while they run: Karpenter removes the nodes once empty).
		var master *corev1.Pod
		nodesOf := map[string]string{}
		err = framework.Poll(ctx, 200*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			pods := &corev1.PodList{}
			if err := k.client.List(ctx, pods, client.InNamespace(ns)); err != nil {
				return false, err.Error(), nil
			}
			for i := range pods.Items {
				if p := &pods.Items[i]; framework.Owner(p, framework.PyTorchJobGVK.Kind) == "zonal" && p.Spec.NodeName != "" {
					nodesOf[p.Name] = p.Spec.NodeName
					if p.Name == "zonal-master-0" {
						master = p
					}
				}
			}
			return len(nodesOf) == 2 && master != nil, fmt.Sprintf("pods of PyTorchJob zonal bound: %v", nodesOf), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for pod, node := range nodesOf {
			n := &corev1.Node{}
			if err := k.client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
				t.Errorf("pod %s: node %q: %v", pod, node, err)
			} else if n.Labels[framework.LabelNodePool] != "zone-b" || n.Labels[corev1.LabelTopologyZone] != "test-zone-b" {
				t.Errorf("pod %s ran on node %s (labels %v), want a node of NodePool zone-b in test-zone-b", pod, node, n.Labels)
			}
		}
		// A user's pod dressed as the master (its owner, labels,
		// tolerations and affinity) that asks for NodePool zone-b's nodes
		// by name. NodePool zone-b may make a third node for it, but the
		// room tally admitted zonal on is zonal's two pods': the pod is
		// never bound beside both of them.
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "zonal-forged", OwnerReferences: master.OwnerReferences, Labels: master.Labels},
			Spec: corev1.PodSpec{Affinity: master.Spec.Affinity, Tolerations: master.Spec.Tolerations,
				NodeSelector: map[string]string{"e2e-zone": "true", corev1.LabelTopologyZone: "test-zone-b", framework.LabelNodePool: "zone-b"},
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/pytorch:v1", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")}}}}}}
		if err := userCreate(ctx, t, &attackRun{s: k, user: user, ns: ns}, forged); err != nil {
			t.Logf("the user's pod %s, dressed as PyTorchJob zonal's master: %v", forged.Name, err)
		} else {
			waitHeldBeside(ctx, t, k.client, ns, forged.Name, "zonal", 2, 2*time.Minute)
			if err := k.client.Delete(ctx, forged, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting pod %s: %v", forged.Name, err)
			}
		}
		waitPyTorchJobs(ctx, t, k.client, ns, []string{"zonal"}, 3*time.Minute)
		checkTopologyAnnotation(ctx, t, k.client, ns, "zonal", "master=test-zone-b/@zone-b:1;worker=test-zone-b/@zone-b:1;zone-flavor")
		ran := rec.Pods("zonal")
		delete(ran, forged.Name)
		if len(ran) != 2 {
			t.Errorf("pods ran %v, want the master and the worker", ran)
		}
		for pod, node := range ran {
			if nodesOf[pod] != node {
				t.Errorf("pod %s ran on node %s, want %s, the node it was bound to", pod, node, nodesOf[pod])
			}
		}
	})

	if lines, err := framework.Forbidden(k.tally.LogPath()); err != nil {
		t.Error(err)
	} else if len(lines) > 0 {
		t.Errorf("tally made %d request(s) its role forbids:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

const (
	// karpenterNodePool is the NodePool of TestKarpenter's GPU nodes.
	karpenterNodePool = "gpu"
	// exampleFlavorLabel is the node label of the GPU training example's flavor
	// (examples/gpu-training/resource-flavor.yaml); its taint is
	// kueue.x-k8s.io/gpu:NoSchedule.
	exampleFlavorLabel = "kueue.x-k8s.io/default-flavor"
)

// startKarpenterCluster brings up TestKarpenter's cluster and what runs on
// it, each stopped when the test ends (the cluster deleted last), and
// returns it as a suite of its own. Its files and logs go to a directory
// kept when the test fails.
func startKarpenterCluster(ctx context.Context, t *testing.T, env framework.Env) *suite {
	t.Helper()
	start := time.Now()
	dir, err := os.MkdirTemp("", "tally-e2e-karpenter-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept %s (kubeconfig, logs of tally, Karpenter and the training operator)", dir)
		} else {
			os.RemoveAll(dir)
		}
	})
	k := &suite{env: env, cluster: framework.NewKarpenterCluster(env, dir)}
	if err := k.cluster.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.cluster.Down(); err != nil {
			t.Errorf("deleting cluster %s: %v", k.cluster.Name, err)
		}
	})
	t.Logf("cluster %s up in %s", k.cluster.Name, time.Since(start).Round(time.Millisecond))
	if k.client, err = framework.NewClient(k.cluster.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := k.cluster.InstallPyTorchJobCRD(ctx); err != nil {
		t.Fatal(err)
	}
	if k.operator, err = framework.NewTrainingOperator(k.cluster, dir); err != nil {
		t.Fatal(err)
	}
	startOperator(ctx, t, k.operator, 2*time.Minute)

	if err := k.cluster.InstallKarpenterCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	pool := framework.NodePool{Name: karpenterNodePool, NodeClass: "default",
		InstanceTypes:    []string{"gpu-4x-amd64-linux", "gpu-8x-amd64-linux"},
		Labels:           map[string]string{exampleFlavorLabel: "true"},
		Taints:           []corev1.Taint{{Key: "kueue.x-k8s.io/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		ConsolidateAfter: 10 * time.Second}
	for _, obj := range []client.Object{framework.KWOKNodeClass("default"), pool.Obj()} {
		if err := k.client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	karpenter, err := framework.NewKarpenter(ctx, k.cluster, dir)
	if err != nil {
		t.Fatal(err)
	}
	startOperator(ctx, t, karpenter, 2*time.Minute)

	// tally as after kubectl apply -k deploy/, with the GPU training
	// example's manifests, unchanged, as its config.
	docs := exampleDocs(t, env.Root)
	if err := framework.ApplyConfig(ctx, k.client, tallyNamespace, strings.Join(docs, "\n---\n")); err != nil {
		t.Fatal(err)
	}
	if err := framework.InstallRBAC(ctx, k.client, filepath.Join(env.Root, "deploy", "base", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := framework.PrepareWebhookConfigurations(ctx, k.client, "tally"); err != nil {
		t.Fatal(err)
	}
	sa, err := framework.ServiceAccountKubeconfig(ctx, k.client, k.cluster.Kubeconfig, tallyNamespace, framework.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	if k.tally, err = framework.NewTally(env.Bin, sa, filepath.Join(dir, "tally")); err != nil {
		t.Fatal(err)
	}
	if err := k.tally.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.tally.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping tally: %v", err)
		}
		if t.Failed() {
			printTail(k.tally.LogPath(), 40)
		}
	})
	if err := k.tally.WaitReady(ctx, time.Minute); err != nil {
		t.Fatalf("tally not ready: %v", err)
	}
	t.Logf("Karpenter, the training operator and tally ready on %s in %s", k.cluster.Name, time.Since(start).Round(time.Millisecond))
	return k
}

// gpuNodes names the nodes that offer GPUs.
func gpuNodes(ctx context.Context, t *testing.T, c client.Reader) []string {
	t.Helper()
	var l corev1.NodeList
	if err := c.List(ctx, &l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range l.Items {
		if framework.NodeGPUs(&l.Items[i]) > 0 {
			out = append(out, l.Items[i].Name)
		}
	}
	return out
}

// waitNoKarpenterNodes waits until Karpenter has removed every node and
// NodeClaim it made (consolidation of empty nodes).
func waitNoKarpenterNodes(ctx context.Context, t *testing.T, c client.Reader) {
	t.Helper()
	err := framework.Poll(ctx, 200*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		nodes, err := framework.KarpenterNodes(ctx, c)
		if err != nil {
			return false, err.Error(), nil
		}
		claims, err := framework.NodeClaims(ctx, c)
		if err != nil {
			return false, err.Error(), nil
		}
		var names []string
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		return len(nodes) == 0 && len(claims) == 0, fmt.Sprintf("Karpenter's nodes %v, %d NodeClaims", names, len(claims)), nil
	})
	if err != nil {
		t.Fatalf("Karpenter did not remove its empty nodes: %v", err)
	}
}

// runningOnKarpenter counts the Running pods of the PyTorchJobs names on
// nodes of Karpenter's NodePool pool, and names those still suspended.
func runningOnKarpenter(ctx context.Context, c client.Reader, pool, ns string, names []string) (int, []string, error) {
	var suspended []string
	for _, name := range names {
		u, err := getPyTorchJob(ctx, c, ns, name)
		if err != nil {
			return 0, nil, err
		}
		if framework.PyTorchJobSuspended(u) {
			suspended = append(suspended, name)
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return 0, nil, err
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !slices.Contains(names, framework.Owner(p, framework.PyTorchJobGVK.Kind)) || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			return 0, nil, err
		}
		if node.Labels[framework.LabelNodePool] == pool {
			n++
		}
	}
	return n, suspended, nil
}

// checkOnKarpenterNodes checks that every pod PyTorchJob name had ran on a
// node of Karpenter's NodePool (the nodes may be gone already: the pod
// names the node it ran on as Karpenter names them, kwok-<NodeClaim>-...).
func checkOnKarpenterNodes(ctx context.Context, t *testing.T, c client.Reader, rec *framework.Recorder, name string) {
	t.Helper()
	for pod, node := range rec.Pods(name) {
		n := &corev1.Node{}
		err := c.Get(ctx, client.ObjectKey{Name: node}, n)
		switch {
		case err == nil && n.Labels[framework.LabelNodePool] != karpenterNodePool:
			t.Errorf("pod %s of %s ran on node %s, not one of Karpenter's", pod, name, node)
		case err != nil && !strings.HasPrefix(node, "kwok-"+karpenterNodePool+"-"):
			t.Errorf("pod %s of %s ran on node %q (%v), not one of Karpenter's", pod, name, node, err)
		}
	}
}

// admittedAt is when the recorder saw PyTorchJob name un-suspended.
func admittedAt(t *testing.T, rec *framework.Recorder, name string) time.Time {
	t.Helper()
	for _, o := range rec.Observations() {
		if o.Job == name && o.Kind == framework.Unsuspended {
			return o.At
		}
	}
	t.Fatalf("PyTorchJob %s was never seen admitted (un-suspended)", name)
	return time.Time{}
}

func getPyTorchJob(ctx context.Context, c client.Reader, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.PyTorchJobGVK)
	return u, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// unmakeableDocs turn on waitForPodsReady with a short timeout and add a
// flavor of spot capacity, which Karpenter's NodePool (on-demand only)
// rules out, with a ClusterQueue of its own.
// exampleDocs are the GPU training example's manifests, tally's config
// in TestKarpenter.
func exampleDocs(t *testing.T, root string) []string {
	t.Helper()
	var docs []string
	for _, f := range exampleFiles {
		b, err := os.ReadFile(filepath.Join(root, "examples", "gpu-training", f))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return docs
}

// checkTopologyAnnotation checks PyTorchJob name's tally.dev/topology, its parts
// sorted, against want.
func checkTopologyAnnotation(ctx context.Context, t *testing.T, c client.Reader, ns, name, want string) {
	t.Helper()
	u, err := getPyTorchJob(ctx, c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	placement := strings.Split(u.GetAnnotations()["tally.dev/topology"], ";")
	slices.Sort(placement)
	if got := strings.Join(placement, ";"); got != want {
		t.Errorf("PyTorchJob %s's placement %q, want %q", name, got, want)
	}
}

// withNodePool adds docs to the GPU training example's config and makes
// NodePool pool, until the test ends, and binds namespace ns to
// ClusterQueue cq, one of docs'.
func withNodePool(ctx context.Context, t *testing.T, k *suite, docs string, pool framework.NodePool, cq, ns string) {
	t.Helper()
	waitNoKarpenterNodes(ctx, t, k.client)
	example := exampleDocs(t, k.env.Root)
	if err := framework.ApplyConfig(ctx, k.client, tallyNamespace, strings.Join(append(example, docs), "\n---\n")); err != nil {
		t.Fatal(err)
	}
	if err := k.client.Create(ctx, pool.Obj()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.client.Delete(ctx, pool.Obj()); err != nil {
			t.Errorf("deleting NodePool %s: %v", pool.Name, err)
		}
		waitNoKarpenterNodes(ctx, t, k.client)
		if err := framework.ApplyConfig(ctx, k.client, tallyNamespace, strings.Join(example, "\n---\n")); err != nil {
			t.Errorf("restoring the GPU training example's config: %v", err)
		}
	})
	if err := framework.WaitClusterQueues(ctx, k.client, 30*time.Second, cq); err != nil {
		t.Fatal(err)
	}
	if err := framework.BindNamespace(ctx, k.client, ns, cq); err != nil {
		t.Fatal(err)
	}
}

// zoneDocs add to the GPU training example's config a Topology of zone
// and node, a flavor of it whose nodes NodePool zone-b makes, and its
// ClusterQueue.
const zoneDocs = `apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata:
  name: zones
spec:
  levels:
  - nodeLabel: topology.kubernetes.io/zone
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: zone-flavor
spec:
  nodeLabels: {e2e-zone: "true"}
  topologyName: zones
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: karpenter-zone
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: zone-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 64}
`

// fitDocs add to the GPU training example's config a flavor placed at
// the node level whose nodes NodePool fit makes, and its ClusterQueue,
// with more quota than the NodePool can make.
const fitDocs = `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: fit-flavor
  annotations: {tally.dev/node-fit: "true"}
spec:
  nodeLabels: {e2e-fit: "true"}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: karpenter-fit
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: fit-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 64}
`

const unmakeableDocs = `apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady:
  enable: true
  timeout: 20s
  blockAdmission: false
  requeuingStrategy:
    backoffBaseSeconds: 2
    backoffLimitCount: 1
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: a100-flavor
spec:
  nodeLabels:
    kueue.x-k8s.io/default-flavor: "true"
    karpenter.sh/capacity-type: spot
  tolerations:
  - key: kueue.x-k8s.io/gpu
    operator: Exists
    effect: NoSchedule
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: karpenter-a100
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100-flavor
      resources:
      - {name: cpu, nominalQuota: 8}
      - {name: nvidia.com/gpu, nominalQuota: 4}
`
