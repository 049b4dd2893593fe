package queues

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Kueue's pod template annotations that ask for a pod set's placement in
// its flavor's topology.
const (
	AnnotationRequiredTopology      = "kueue.x-k8s.io/podset-required-topology"
	AnnotationPreferredTopology     = "kueue.x-k8s.io/podset-preferred-topology"
	AnnotationUnconstrainedTopology = "kueue.x-k8s.io/podset-unconstrained-topology"
	AnnotationSliceRequiredTopology = "kueue.x-k8s.io/podset-slice-required-topology"
	AnnotationSliceSize             = "kueue.x-k8s.io/podset-slice-size"
	AnnotationPodSetGroup           = "kueue.x-k8s.io/podset-group-name"
)

// AnnotationNodeFit, "true" on a ResourceFlavor without a Topology, has
// each pod of its workloads fit on one of its nodes: the flavor is placed
// in NodeFitTopology, whose one level is the node, and a workload that
// fits its quota but whose pods no nodes hold one by one waits.
const AnnotationNodeFit = "tally.dev/node-fit"

// NodeFitTopology is the Topology of the flavors that AnnotationNodeFit
// opts into node-level fit: their nodes, one domain each. Its name is
// not one a Topology document may have.
var NodeFitTopology = &Topology{Name: "tally.dev/nodes", Levels: []string{corev1.LabelHostname}}

// TopologyRequestOf reads a pod template's annotations: what its pod set
// asks of its placement (nil when it asks nothing, and is placed
// unconstrained on a flavor with a topology, as in Kueue), and its group.
// An error names the annotation and why it is wrong.
func TopologyRequestOf(ann map[string]string) (*TopologyRequest, string, error) {
	path := func(key string) string { return "metadata.annotations[" + key + "]" }
	var req *TopologyRequest
	set := func(mode TopologyMode, key, level string) error {
		if req != nil {
			return fmt.Errorf("%s: a pod set asks one of %s, %s and %s", path(key), AnnotationRequiredTopology, AnnotationPreferredTopology, AnnotationUnconstrainedTopology)
		}
		req = &TopologyRequest{Mode: mode, Level: level}
		return nil
	}
	if v, ok := ann[AnnotationRequiredTopology]; ok {
		if v == "" {
			return nil, "", fmt.Errorf("%s: empty; name a level of the flavor's topology (a node label)", path(AnnotationRequiredTopology))
		}
		_ = set(TopologyRequired, AnnotationRequiredTopology, v)
	}
	if v, ok := ann[AnnotationPreferredTopology]; ok {
		if v == "" {
			return nil, "", fmt.Errorf("%s: empty; name a level of the flavor's topology (a node label)", path(AnnotationPreferredTopology))
		}
		if err := set(TopologyPreferred, AnnotationPreferredTopology, v); err != nil {
			return nil, "", err
		}
	}
	if v, ok := ann[AnnotationUnconstrainedTopology]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %q is not true or false", path(AnnotationUnconstrainedTopology), v)
		}
		if b {
			if err := set(TopologyUnconstrained, AnnotationUnconstrainedTopology, ""); err != nil {
				return nil, "", err
			}
		}
	}
	sliceLevel, hasSlice := ann[AnnotationSliceRequiredTopology]
	size, hasSize := ann[AnnotationSliceSize]
	switch {
	case hasSlice && sliceLevel == "":
		return nil, "", fmt.Errorf("%s: empty; name a level of the flavor's topology (a node label)", path(AnnotationSliceRequiredTopology))
	case hasSlice && !hasSize:
		return nil, "", fmt.Errorf("%s: required with %s", path(AnnotationSliceSize), AnnotationSliceRequiredTopology)
	case hasSize && !hasSlice:
		return nil, "", fmt.Errorf("%s: set without %s", path(AnnotationSliceSize), AnnotationSliceRequiredTopology)
	case hasSlice:
		n, err := strconv.ParseInt(size, 10, 32)
		if err != nil || n < 1 {
			return nil, "", fmt.Errorf("%s: %q is not a whole number of pods of at least 1", path(AnnotationSliceSize), size)
		}
		if req == nil {
			req = &TopologyRequest{Mode: TopologyUnconstrained}
		}
		req.SliceLevel, req.SliceSize = sliceLevel, int32(n)
	}
	group := ann[AnnotationPodSetGroup]
	if group != "" && req == nil {
		return nil, "", fmt.Errorf("%s: a group's pod sets each ask %s or %s", path(AnnotationPodSetGroup), AnnotationRequiredTopology, AnnotationPreferredTopology)
	}
	return req, group, nil
}
