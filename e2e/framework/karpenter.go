package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Karpenter is Karpenter with its KWOK cloud provider
// (sigs.k8s.io/karpenter/kwok), built into the toolchain the first time a
// test asks for it and run on the host by e2e/cluster/karpenter.sh. The
// Node objects it makes carry kwok's annotation kwok.x-k8s.io/node: fake,
// so the cluster's kwok runs them.
const (
	Karpenter       = "karpenter"
	karpenterScript = "karpenter.sh"

	// LabelNodePool names the NodePool of each node Karpenter makes.
	LabelNodePool = "karpenter.sh/nodepool"
)

var (
	// NodePoolGVK and NodeClaimGVK are Karpenter's karpenter.sh/v1 kinds;
	// KWOKNodeClassGVK the KWOK provider's node class.
	NodePoolGVK      = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}
	NodeClaimGVK     = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}
	KWOKNodeClassGVK = schema.GroupVersionKind{Group: "karpenter.kwok.sh", Version: "v1alpha1", Kind: "KWOKNodeClass"}
)

// NewKarpenterCluster is a cluster of this process, apart from the suite's
// (its name has "karpenter-" before the pid), whose only fake node is the
// CPU node of e2e/cluster/karpenter-nodes.yaml: every GPU node in it is
// one Karpenter makes. Its kubeconfig goes to dir.
func NewKarpenterCluster(env Env, dir string) *Cluster {
	return &Cluster{Env: env, Name: fmt.Sprintf("%skarpenter-%d", ClusterPrefix, os.Getpid()),
		Kubeconfig: filepath.Join(dir, "kubeconfig"), NodesFile: filepath.Join(env.Root, "e2e", "cluster", "karpenter-nodes.yaml")}
}

// InstallKarpenterCRDs builds Karpenter if needed, installs its NodePool,
// NodeClaim and KWOKNodeClass CRDs and waits until they are served.
func (c *Cluster) InstallKarpenterCRDs(ctx context.Context) error {
	if err := c.Env.BuildTool(ctx, Karpenter); err != nil {
		return err
	}
	return c.script(ctx, karpenterScript, "crds", c.Kubeconfig)
}

// NewKarpenter builds Karpenter if needed and picks free ports for one of
// cluster c that logs to dir/karpenter.log, with the instance types of
// e2e/cluster/karpenter-instance-types.json. It is ready when its /readyz
// answers, which waits for the NodePool and NodeClaim CRDs (see
// InstallKarpenterCRDs) and its caches.
func NewKarpenter(ctx context.Context, c *Cluster, dir string) (*Operator, error) {
	if err := c.Env.BuildTool(ctx, Karpenter); err != nil {
		return nil, err
	}
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	o := newOperator(c, dir, "Karpenter", Karpenter, karpenterScript, fmt.Sprint(ports[0]), fmt.Sprint(ports[1]))
	o.ProbePort = ports[0]
	return o, nil
}

// NodePool describes a Karpenter NodePool of the KWOK provider.
type NodePool struct {
	Name string
	// NodeClass names the KWOKNodeClass (see KWOKNodeClass).
	NodeClass string
	// InstanceTypes are the instance types it may make (names of the
	// instance types file).
	InstanceTypes []string
	// Labels and Taints go on every node it makes.
	Labels map[string]string
	Taints []corev1.Taint
	// ConsolidateAfter is how long a node stays empty before Karpenter
	// removes it.
	ConsolidateAfter time.Duration
	// Limits caps what its nodes have in all (spec.limits); nil: no cap.
	Limits corev1.ResourceList
	// Requirements are more requirements of its nodes (a zone).
	Requirements []corev1.NodeSelectorRequirement
}

// Obj is the NodePool: on-demand capacity of InstanceTypes, consolidated
// when empty after ConsolidateAfter, all nodes at once if need be, never
// expiring, up to Limits.
func (p NodePool) Obj() *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	var taints, types []any
	for _, t := range p.Taints {
		taints = append(taints, map[string]any{"key": t.Key, "value": t.Value, "effect": string(t.Effect)})
	}
	for _, t := range p.InstanceTypes {
		types = append(types, t)
	}
	req := func(key string, values ...any) map[string]any {
		return map[string]any{"key": key, "operator": "In", "values": values}
	}
	spec := map[string]any{
		"requirements": []any{
			req(corev1.LabelInstanceTypeStable, types...),
			req("karpenter.sh/capacity-type", "on-demand"),
			req(corev1.LabelArchStable, "amd64"),
			req(corev1.LabelOSStable, "linux"),
		},
		"nodeClassRef": map[string]any{"group": KWOKNodeClassGVK.Group, "kind": KWOKNodeClassGVK.Kind, "name": p.NodeClass},
		"expireAfter":  "Never",
	}
	for _, r := range p.Requirements {
		values := make([]any, len(r.Values))
		for i, v := range r.Values {
			values[i] = v
		}
		spec["requirements"] = append(spec["requirements"].([]any), map[string]any{"key": r.Key, "operator": string(r.Operator), "values": values})
	}
	if len(taints) > 0 {
		spec["taints"] = taints
	}
	pool := map[string]any{
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": spec},
		"disruption": map[string]any{
			"consolidationPolicy": "WhenEmpty",
			"consolidateAfter":    p.ConsolidateAfter.String(),
			"budgets":             []any{map[string]any{"nodes": "100%"}},
		},
	}
	if len(p.Limits) > 0 {
		limits := map[string]any{}
		for r, q := range p.Limits {
			limits[string(r)] = q.String()
		}
		pool["limits"] = limits
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": pool}}
	u.SetGroupVersionKind(NodePoolGVK)
	u.SetName(p.Name)
	return u
}

// KWOKNodeClass is the KWOK provider's node class name (it has no spec).
func KWOKNodeClass(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(KWOKNodeClassGVK)
	u.SetName(name)
	return u
}

// KarpenterNodes lists the nodes Karpenter made (those with a NodePool
// label), deleted or not.
func KarpenterNodes(ctx context.Context, c client.Reader) ([]corev1.Node, error) {
	var l corev1.NodeList
	if err := c.List(ctx, &l, client.HasLabels{LabelNodePool}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// NodeClaims lists Karpenter's NodeClaims.
func NodeClaims(ctx context.Context, c client.Reader) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(NodeClaimGVK.GroupVersion().WithKind("NodeClaimList"))
	if err := c.List(ctx, l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// NodeGPUs is the GPUs a node offers (its allocatable nvidia.com/gpu).
func NodeGPUs(n *corev1.Node) int64 {
	q := n.Status.Allocatable[ResourceGPU]
	return q.Value()
}

// KarpenterLog follows the nodes Karpenter makes and its NodeClaims, from
// a watch, so that nodes made and removed between two polls are seen.
type KarpenterLog struct {
	nodes, claims follower

	mu sync.Mutex
	// live are the GPUs of each Karpenter node that exists now.
	live map[string]int64
	// gpus is the total of live after each change, in order.
	gpus []GPUsAt
	// claims maps each NodeClaim seen to when the watch first saw it.
	claimSeen map[string]time.Time
	// writers lists, for each node ever seen, the field managers of its
	// managedFields (all versions seen).
	writers map[string][]string
}

// GPUsAt is the total GPUs of Karpenter's nodes from At on.
type GPUsAt struct {
	At   time.Time
	GPUs int64
}

// WatchKarpenter starts following the cluster's nodes and NodeClaims. Call
// Stop when done.
func WatchKarpenter(ctx context.Context, c client.WithWatch) (*KarpenterLog, error) {
	l := &KarpenterLog{live: map[string]int64{}, claimSeen: map[string]time.Time{}, writers: map[string][]string{}}
	node := func(o runtime.Object, deleted bool) {
		n, ok := o.(*corev1.Node)
		if !ok {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, m := range n.ManagedFields {
			if !slices.Contains(l.writers[n.Name], m.Manager) {
				l.writers[n.Name] = append(l.writers[n.Name], m.Manager)
			}
		}
		if n.Labels[LabelNodePool] == "" {
			return
		}
		if deleted {
			delete(l.live, n.Name)
		} else {
			l.live[n.Name] = NodeGPUs(n)
		}
		l.record()
	}
	l.nodes = follower{c: c, newList: func() client.ObjectList { return &corev1.NodeList{} },
		onList: func(items []runtime.Object) {
			l.mu.Lock()
			clear(l.live)
			l.mu.Unlock()
			for _, o := range items {
				node(o, false)
			}
		}, onChange: node}
	claim := func(o runtime.Object, _ bool) {
		if u, ok := o.(*unstructured.Unstructured); ok {
			l.mu.Lock()
			defer l.mu.Unlock()
			if _, seen := l.claimSeen[u.GetName()]; !seen {
				l.claimSeen[u.GetName()] = time.Now()
			}
		}
	}
	l.claims = follower{c: c, newList: func() client.ObjectList {
		ul := &unstructured.UnstructuredList{}
		ul.SetGroupVersionKind(NodeClaimGVK.GroupVersion().WithKind("NodeClaimList"))
		return ul
	}, onList: func(items []runtime.Object) {
		for _, o := range items {
			claim(o, false)
		}
	}, onChange: claim}
	if err := l.nodes.start(ctx); err != nil {
		return nil, err
	}
	if err := l.claims.start(ctx); err != nil {
		_ = l.nodes.stop()
		return nil, err
	}
	return l, nil
}

// record notes the total GPUs of the live nodes, if it changed. l.mu is held.
func (l *KarpenterLog) record() {
	var total int64
	for _, g := range l.live {
		total += g
	}
	if n := len(l.gpus); n == 0 || l.gpus[n-1].GPUs != total {
		l.gpus = append(l.gpus, GPUsAt{At: time.Now(), GPUs: total})
	}
}

// PeakGPUs is the most GPUs Karpenter's nodes had at once between from
// and to (the total in force at from included).
func (l *KarpenterLog) PeakGPUs(from, to time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var peak int64
	for i, g := range l.gpus {
		if g.At.After(to) {
			break
		}
		if next := i + 1; next < len(l.gpus) && !l.gpus[next].At.After(from) {
			continue
		}
		peak = max(peak, g.GPUs)
	}
	return peak
}

// ClaimsSeen lists the NodeClaims the watch first saw between from and to.
func (l *KarpenterLog) ClaimsSeen(from, to time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name, at := range l.claimSeen {
		if !at.Before(from) && !at.After(to) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// NodeWriters lists, for each node whose managedFields ever named a field
// manager starting with prefix, the node and those managers.
func (l *KarpenterLog) NodeWriters(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for node, ms := range l.writers {
		for _, m := range ms {
			if strings.HasPrefix(m, prefix) {
				out = append(out, node+": "+m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// NodesSeen is how many nodes the watch saw (Karpenter's and others).
func (l *KarpenterLog) NodesSeen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.writers)
}

// Gaps says how many times the watches had to list again.
func (l *KarpenterLog) Gaps() int { return l.nodes.Gaps() + l.claims.Gaps() }

// Stop ends the watches and returns the first error either had.
func (l *KarpenterLog) Stop() error {
	return errors.Join(l.nodes.stop(), l.claims.stop())
}
