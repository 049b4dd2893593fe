package kinds

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/queues"
)

// A cache of Jobs holds many values alike: the Jobs of one CronJob, one
// pipeline or one user mostly have the same containers' resources and
// the same labels, and the same node affinity and tolerations (those of
// their queue's flavors). The stripped copies share one of each
// (queues.Share): a map of one entry takes about 600 bytes.
var (
	sharedContainers  queues.Share[string, []corev1.Container]
	sharedMaps        queues.Share[string, map[string]string]
	sharedAffinities  queues.Share[string, *corev1.Affinity]
	sharedTolerations queues.Share[string, []corev1.Toleration]
	sharedBools       queues.Share[bool, *bool]
	sharedInt32s      queues.Share[int32, *int32]
	sharedInt64s      queues.Share[int64, *int64]
	sharedStrings     queues.Share[string, *string]
	sharedModes       queues.Share[batchv1.CompletionMode, *batchv1.CompletionMode]
	sharedPolicies    queues.Share[batchv1.PodReplacementPolicy, *batchv1.PodReplacementPolicy]
)

// shareContainers is cs, stripped, or an equal slice already shared.
func shareContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	var b strings.Builder
	for i := range cs {
		c := &cs[i]
		b.WriteString(c.Name)
		b.WriteByte(0)
		if c.RestartPolicy != nil {
			b.WriteString(string(*c.RestartPolicy))
		}
		b.WriteByte(0)
		b.WriteString(queues.FormatPodOverhead(c.Resources.Requests))
		b.WriteByte(0)
		b.WriteString(queues.FormatPodOverhead(c.Resources.Limits))
		b.WriteByte(0)
		for _, claim := range c.Resources.Claims {
			b.WriteString(claim.Name)
			b.WriteByte('/')
			b.WriteString(claim.Request)
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	return sharedContainers.Of(b.String(), cs)
}

// shareMap is m, or an equal map already shared; nil stays nil.
func shareMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return sharedMaps.Of(queues.SelectorKey(m), m)
}

// shareAffinity is a, or an equal affinity already shared; nil stays nil.
func shareAffinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil {
		return nil
	}
	b, err := a.Marshal()
	if err != nil {
		return a
	}
	return sharedAffinities.Of(string(b), a)
}

// shareTolerations is ts, or an equal slice already shared.
func shareTolerations(ts []corev1.Toleration) []corev1.Toleration {
	if len(ts) == 0 {
		return ts
	}
	var b strings.Builder
	for i := range ts {
		t, _ := ts[i].Marshal()
		b.Write(t)
		b.WriteByte(0)
	}
	return sharedTolerations.Of(b.String(), ts)
}

// sharePtr is p, or a pointer to the same value already shared by s;
// nil stays nil.
func sharePtr[T comparable](s *queues.Share[T, *T], p *T) *T {
	if p == nil {
		return nil
	}
	return s.Of(*p, p)
}
