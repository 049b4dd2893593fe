package scenario

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Topology gives the scenario's ResourceFlavor a topology and the nodes
// it is made of: every combination of one domain of each level, Count per
// level within its parent, each node with NodeCapacity allocatable.
type Topology struct {
	// Name is the Topology document's name.
	Name string `json:"name"`
	// Levels run from the coarsest to the finest; the finest is usually
	// kubernetes.io/hostname.
	Levels       []Level      `json:"levels"`
	NodeCapacity NodeCapacity `json:"nodeCapacity"`
	// FlavorNodeLabel is the label, with the value FlavorNodeValue, that
	// the flavor's nodeLabels select and every node carries.
	FlavorNodeLabel string `json:"flavorNodeLabel"`
}

// Level is one level of a Topology: Count domains in each domain of the
// level above, named <Name>-<i> in the node label NodeLabel.
type Level struct {
	Name      string `json:"name"`
	Count     int    `json:"count"`
	NodeLabel string `json:"nodeLabel"`
}

// NodeCapacity is each node's allocatable cpu and memory.
type NodeCapacity struct {
	CPU    resource.Quantity `json:"cpu"`
	Memory resource.Quantity `json:"memory"`
}

// Placement is a class's topology request, as Kueue's pod-template
// annotations write it.
type Placement struct {
	// Constraint: required (all pods in one domain of Level), preferred
	// (in one if one holds them), or balanced (in slices of SliceSize
	// pods, each slice in one domain of Level).
	Constraint string `json:"constraint"`
	// Level is the node label of one of the topology's levels.
	Level     string `json:"level"`
	SliceSize int32  `json:"sliceSize,omitempty"`
}

// The placement constraints.
const (
	PlacementRequired  = "required"
	PlacementPreferred = "preferred"
	PlacementBalanced  = "balanced"
)

// FlavorNodeValue is the value of a topology's FlavorNodeLabel on its
// nodes.
const FlavorNodeValue = "tas"

// maxNodes bounds a topology's nodes: each is an object on the API server.
const maxNodes = 10000

// validate reports a topology's problems, under the field path at.
func (t *Topology) validate(at string) []error {
	if t == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !isDNSLabel(t.Name) {
		bad("%s.name: %q is not a lowercase DNS label", at, t.Name)
	}
	if len(t.Levels) == 0 || len(t.Levels) > 16 {
		bad("%s.levels: want 1 to 16, got %d", at, len(t.Levels))
	}
	names, labels := map[string]bool{}, map[string]bool{}
	nodes := 1
	for i, l := range t.Levels {
		p := fmt.Sprintf("%s.levels[%d]", at, i)
		switch {
		case !isDNSLabel(l.Name):
			bad("%s.name: %q is not a lowercase DNS label", p, l.Name)
		case names[l.Name]:
			bad("%s.name: %q is repeated", p, l.Name)
		}
		names[l.Name] = true
		switch {
		case l.NodeLabel == "":
			bad("%s.nodeLabel: required", p)
		case labels[l.NodeLabel]:
			bad("%s.nodeLabel: %q is repeated", p, l.NodeLabel)
		case l.NodeLabel == t.FlavorNodeLabel:
			bad("%s.nodeLabel: %q is the flavorNodeLabel", p, l.NodeLabel)
		}
		labels[l.NodeLabel] = true
		if l.Count <= 0 {
			bad("%s.count: must be positive", p)
		} else if nodes *= l.Count; nodes > maxNodes {
			bad("%s.count: makes more than %d nodes", p, maxNodes)
			nodes = 1
		}
	}
	if t.NodeCapacity.CPU.Sign() <= 0 {
		bad("%s.nodeCapacity.cpu: must be positive", at)
	}
	if t.NodeCapacity.Memory.Sign() <= 0 {
		bad("%s.nodeCapacity.memory: must be positive", at)
	}
	if t.FlavorNodeLabel == "" {
		bad("%s.flavorNodeLabel: required", at)
	}
	return errs
}

// validate reports a class's placement's problems, under the field path
// at, for Jobs of pods pods.
func (p *Placement) validate(at string, pods int32, t *Topology) []error {
	if p == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if t == nil {
		bad("%s: needs the scenario's topology", at)
	}
	switch p.Constraint {
	case PlacementRequired, PlacementPreferred:
		if p.SliceSize != 0 {
			bad("%s.sliceSize: only for balanced", at)
		}
	case PlacementBalanced:
		if p.SliceSize <= 0 {
			bad("%s.sliceSize: must be positive for balanced", at)
		} else if pods%p.SliceSize != 0 {
			bad("%s.sliceSize: %d does not divide the Job's %d pods", at, p.SliceSize, pods)
		}
	default:
		bad("%s.constraint: %q is not required, preferred or balanced", at, p.Constraint)
	}
	if t != nil && !t.hasLevel(p.Level) {
		bad("%s.level: %q is not the nodeLabel of one of the topology's levels", at, p.Level)
	}
	return errs
}

func (t *Topology) hasLevel(label string) bool {
	for _, l := range t.Levels {
		if l.NodeLabel == label {
			return true
		}
	}
	return false
}

// Node is one node of a topology: its name and labels. Its allocatable is
// the topology's NodeCapacity.
type Node struct {
	Name   string
	Labels map[string]string
}

// Nodes lists the topology's nodes, as Kueue's scheduler-performance
// runner makes them: a node has, for each level, the label value
// <level name>-<i> (i counted within its parent), and is named node-
// followed by each value's first letter and index (node-b0-r2-n15).
func (t *Topology) Nodes() []Node {
	var out []Node
	var walk func(level int, name string, labels map[string]string)
	walk = func(level int, name string, labels map[string]string) {
		if level == len(t.Levels) {
			n := Node{Name: name, Labels: map[string]string{t.FlavorNodeLabel: FlavorNodeValue}}
			for k, v := range labels {
				n.Labels[k] = v
			}
			out = append(out, n)
			return
		}
		l := t.Levels[level]
		for i := range l.Count {
			labels[l.NodeLabel] = fmt.Sprintf("%s-%d", l.Name, i)
			walk(level+1, fmt.Sprintf("%s-%c%d", name, l.Name[0], i), labels)
		}
		delete(labels, l.NodeLabel)
	}
	walk(0, "node", map[string]string{})
	return out
}

// NodeCount is the number of the topology's nodes.
func (t *Topology) NodeCount() int {
	n := 1
	for _, l := range t.Levels {
		n *= l.Count
	}
	return n
}

// config renders the Topology document and the flavor that names it.
func (t *Topology) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: %s}\nspec:\n  levels:\n", t.Name)
	for _, l := range t.Levels {
		fmt.Fprintf(&b, "  - nodeLabel: %s\n", l.NodeLabel)
	}
	fmt.Fprintf(&b, "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: %s}\nspec:\n  nodeLabels: {%s: %q}\n  topologyName: %s\n",
		FlavorName, t.FlavorNodeLabel, FlavorNodeValue, t.Name)
	return b.String()
}
