// Package flavors owns ResourceFlavors and quota arithmetic: the Amount value
// type, resource lists, the bounds on a quantity's text checked before it is
// parsed (CheckQuantityText), and the node labels, taints and tolerations that
// tie a flavor to nodes, with whether a pod's node affinity allows them
// (Affinity).
//
// It is the leaf of tally's import graph: it may import only the standard
// library, k8s.io/api, k8s.io/apimachinery, k8s.io/component-helpers and
// k8s.io/klog/v2 (for the logger that the API's taint toleration check
// takes), never another tally package.
package flavors
