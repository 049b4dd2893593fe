package queues

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"tally.dev/tally/flavors"
)

// PodDefaults is what the API server adds to the pods of a namespace
// beyond their template, at their creation: the container requests of
// the namespace's LimitRanges, and the pod overhead of RuntimeClasses. A
// workload is charged what its pods will reserve, so its pod templates
// are read with them (Apply).
type PodDefaults struct {
	// Requests is the request a container gets of a resource it neither
	// requests nor limits: the defaultRequest of the namespace's
	// LimitRanges of type Container (see LimitRangeRequests).
	Requests corev1.ResourceList
	// Overhead is the pod overhead of each RuntimeClass, by name.
	Overhead map[string]corev1.ResourceList
	// ClaimTemplates are the namespace's ResourceClaimTemplates, by
	// name, stripped (StripClaimTemplate): ClaimRequests reads the
	// devices a pod's claims ask for from them.
	ClaimTemplates map[string]*resourcev1.ResourceClaimTemplate
	// Config, when set, is the config in force: the init containers that
	// operators add to pods (Inject) count with the resources the
	// workload's ClusterQueue covers.
	Config *Config
}

// Inject returns spec with the init containers an operator adds to its
// pods (cs), as queued in ClusterQueue queue: each asks only for the
// resources that queue covers, so that what the operator adds never makes
// a workload ask for a resource its queue does not cover. It returns spec
// itself when there is nothing to add or no config to say what is
// covered; d may be nil.
func (d *PodDefaults) Inject(queue string, spec *corev1.PodSpec, cs []corev1.Container) *corev1.PodSpec {
	return d.inject(queue, spec, cs, true)
}

// Uncharged is what the init containers an operator adds to its pods
// (cs) make each pod of spec ask for beyond Inject's spec, in the
// resources ClusterQueue queue does not cover and another does: what
// the pods really ask for and the workload is not charged. nil when that
// is nothing.
func (d *PodDefaults) Uncharged(queue string, spec *corev1.PodSpec, cs []corev1.Container) flavors.Resources {
	if d == nil || d.Config == nil || len(cs) == 0 {
		return nil
	}
	charged := PodRequests(d.inject(queue, spec, cs, true))
	var out flavors.Resources
	for r, a := range PodRequests(d.inject(queue, spec, cs, false)) {
		if more := a - charged[r]; more > 0 && d.Config.Covers(r) {
			if out == nil {
				out = flavors.Resources{}
			}
			out[r] = more
		}
	}
	return out
}

// inject is Inject; with trim false, the containers keep every request.
func (d *PodDefaults) inject(queue string, spec *corev1.PodSpec, cs []corev1.Container, trim bool) *corev1.PodSpec {
	if d == nil || d.Config == nil || len(cs) == 0 {
		return spec
	}
	cq := d.Config.ClusterQueues[queue]
	if cq == nil {
		return spec
	}
	covered := func(r corev1.ResourceName) bool {
		for _, g := range cq.ResourceGroups {
			if slices.Contains(g.Covered, r) {
				return true
			}
		}
		return false
	}
	out := *spec
	out.InitContainers = slices.Clone(spec.InitContainers)
	for _, c := range cs {
		if slices.ContainsFunc(out.InitContainers, func(have corev1.Container) bool { return have.Name == c.Name }) {
			continue
		}
		c = *c.DeepCopy()
		if trim {
			maps.DeleteFunc(c.Resources.Requests, func(r corev1.ResourceName, _ resource.Quantity) bool { return !covered(r) })
			maps.DeleteFunc(c.Resources.Limits, func(r corev1.ResourceName, _ resource.Quantity) bool { return !covered(r) })
		}
		out.InitContainers = append(out.InitContainers, c)
	}
	return &out
}

// LimitRangeRequests merges the container defaultRequests of a
// namespace's LimitRanges as the LimitRanger admission plugin applies
// them: in name order, a resource that one sets is not set again by
// another. The API server fills a LimitRange's defaultRequest from its
// default (and that from its max) when the LimitRange is created, so
// defaultRequest is all there is to read.
func LimitRangeRequests(ranges []*corev1.LimitRange) corev1.ResourceList {
	ranges = slices.SortedFunc(slices.Values(ranges), func(a, b *corev1.LimitRange) int { return strings.Compare(a.Name, b.Name) })
	var out corev1.ResourceList
	for _, lr := range ranges {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			for n, q := range item.DefaultRequest {
				if _, ok := out[n]; !ok {
					if out == nil {
						out = corev1.ResourceList{}
					}
					out[n] = q
				}
			}
		}
	}
	return out
}

// Apply returns spec as its pods are admitted: each container (init
// containers too) requests the LimitRange default of every resource it
// neither requests nor limits (a limit stands for the request, as the API
// server defaults it before LimitRanger runs), and the pod gets its
// RuntimeClass's overhead unless it sets one. It returns spec itself when
// nothing applies; d may be nil.
func (d *PodDefaults) Apply(spec *corev1.PodSpec) *corev1.PodSpec {
	if d == nil {
		return spec
	}
	var overhead corev1.ResourceList
	if spec.RuntimeClassName != nil && spec.Overhead == nil {
		overhead = d.Overhead[*spec.RuntimeClassName]
	}
	missing := func(c *corev1.Container) bool {
		for n := range d.Requests {
			if _, ok := c.Resources.Requests[n]; ok {
				continue
			}
			if _, ok := c.Resources.Limits[n]; !ok {
				return true
			}
		}
		return false
	}
	needed := overhead != nil
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			needed = needed || missing(&cs[i])
		}
	}
	if !needed {
		return spec
	}
	out := *spec
	if overhead != nil {
		out.Overhead = overhead
	}
	for _, cs := range []*[]corev1.Container{&out.InitContainers, &out.Containers} {
		cp := slices.Clone(*cs)
		for i := range cp {
			c := &cp[i]
			if !missing(c) {
				continue
			}
			reqs := c.Resources.Requests.DeepCopy()
			if reqs == nil {
				reqs = corev1.ResourceList{}
			}
			for n, q := range d.Requests {
				_, requested := reqs[n]
				_, limited := c.Resources.Limits[n]
				if !requested && !limited {
					reqs[n] = q
				}
			}
			c.Resources.Requests = reqs
		}
		*cs = cp
	}
	return &out
}

// ParsePodOverhead reads an AnnotationPodOverhead value,
// "cpu=100m,memory=64Mi". Anyone who can write the workload can write
// it, and it only ever adds to what the workload is charged, so a part
// that is not a resource name and a non-negative quantity is left out.
func ParsePodOverhead(s string) corev1.ResourceList {
	if s == "" {
		return nil
	}
	var out corev1.ResourceList
	for part := range strings.SplitSeq(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			continue
		}
		q, err := resource.ParseQuantity(value)
		if err != nil || q.Sign() <= 0 {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		out[corev1.ResourceName(name)] = q
	}
	return out
}

// FormatPodOverhead writes an AnnotationPodOverhead value, in name order.
func FormatPodOverhead(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for _, n := range slices.Sorted(maps.Keys(l)) {
		q := l[n]
		parts = append(parts, string(n)+"="+q.String())
	}
	return strings.Join(parts, ",")
}

// WithPodOverhead returns spec with extra added to its pod overhead, in
// a copy; spec itself when extra is empty.
func WithPodOverhead(spec *corev1.PodSpec, extra corev1.ResourceList) *corev1.PodSpec {
	if len(extra) == 0 {
		return spec
	}
	out := *spec
	out.Overhead = spec.Overhead.DeepCopy()
	if out.Overhead == nil {
		out.Overhead = corev1.ResourceList{}
	}
	for n, q := range extra {
		sum := out.Overhead[n]
		sum.Add(q)
		out.Overhead[n] = sum
	}
	return &out
}
