// Package flavors owns ResourceFlavors and quota arithmetic: the Amount value
// type, resource lists, and the node labels, taints and tolerations that tie a
// flavor to nodes.
//
// It is the leaf of tally's import graph: it may import only the standard
// library and k8s.io/api, k8s.io/apimachinery and k8s.io/component-helpers,
// never another tally package.
package flavors
