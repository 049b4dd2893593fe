package perf

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"tally.dev/tally/e2e/perf/scenario"
)

// kueueCleanupLabel is the label Kueue's performance runner puts on what
// it makes, its nodes among them; tally's runner puts it on its nodes
// too, so that the two runs' nodes are the same objects.
const kueueCleanupLabel = "kueue.x-k8s.io/performance-scheduler-cleanup"

// nodeWriters is how many nodes createNodes writes at once.
const nodeWriters = 16

// createNodes makes the topology's nodes as Kueue's performance runner
// makes them: the labels scenario.Topology.Nodes gives, then a status
// with the topology's capacity allocatable (and room for 110 pods) and
// the Ready condition, without the API server's not-ready taint. No kubelet or node controller runs, so nothing
// changes them afterwards.
func createNodes(ctx context.Context, cs kubernetes.Interface, t *scenario.Topology) error {
	nodes := t.Nodes()
	work := make(chan scenario.Node)
	errs := make(chan error, nodeWriters)
	var wg sync.WaitGroup
	for range nodeWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if err := createNode(ctx, cs, n, t.NodeCapacity); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for _, n := range nodes {
		select {
		case work <- n:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func createNode(ctx context.Context, cs kubernetes.Interface, n scenario.Node, capacity scenario.NodeCapacity) error {
	labels := map[string]string{kueueCleanupLabel: "true"}
	for k, v := range n.Labels {
		labels[k] = v
	}
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", n.Name, err)
	}
	node.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    capacity.CPU,
		corev1.ResourceMemory: capacity.Memory,
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if node, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking node %s Ready: %w", n.Name, err)
	}
	// The API server taints a new node not-ready (TaintNodesByCondition);
	// with no node controller to lift it, it is lifted here, as Kueue's
	// runner does once the node is Ready.
	kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if len(kept) == len(node.Spec.Taints) {
		return nil
	}
	node.Spec.Taints = kept
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("lifting node %s's not-ready taint: %w", n.Name, err)
	}
	return nil
}
