package kinds

import (
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/queues"
)

// A cache of Jobs holds many values alike: the Jobs of one CronJob, one
// pipeline or one user mostly have the same containers' resources and
// the same labels, and the same node affinity and tolerations (those of
// their queue's flavors). Each such value costs a map, a slice or a
// pointer of its own per Job (a map of one entry takes about 600 bytes),
// so the stripped copies share one of each: a share keeps the first copy
// of each distinct value it sees, by a key that says what the value is,
// and hands it out for the others. A value shared is never changed: the
// informer's objects are read-only, and the ledger changes none. A share
// keeps at most shareMax values and then starts again empty, so many
// distinct values (a user's Jobs, each with other requests) cost what
// their own copies do, no more.
type share[K comparable, V any] struct {
	mu     sync.Mutex
	values map[K]V
}

// shareMax bounds each share.
const shareMax = 4096

// of is the value shared for key, which v is: v itself the first time.
func (s *share[K, V]) of(key K, v V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.values[key]; ok {
		return have
	}
	if s.values == nil || len(s.values) >= shareMax {
		s.values = make(map[K]V)
	}
	s.values[key] = v
	return v
}

var (
	sharedContainers  share[string, []corev1.Container]
	sharedMaps        share[string, map[string]string]
	sharedAffinities  share[string, *corev1.Affinity]
	sharedTolerations share[string, []corev1.Toleration]
	sharedInt32s      share[int32, *int32]
	sharedInt64s      share[int64, *int64]
	sharedStrings     share[string, *string]
	sharedModes       share[batchv1.CompletionMode, *batchv1.CompletionMode]
	sharedPolicies    share[batchv1.PodReplacementPolicy, *batchv1.PodReplacementPolicy]
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
	return sharedContainers.of(b.String(), cs)
}

// shareMap is m, or an equal map already shared; nil stays nil.
func shareMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return sharedMaps.of(queues.SelectorKey(m), m)
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
	return sharedAffinities.of(string(b), a)
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
	return sharedTolerations.of(b.String(), ts)
}

// sharePtr is p, or a pointer to the same value already shared by s;
// nil stays nil.
func sharePtr[T comparable](s *share[T, *T], p *T) *T {
	if p == nil {
		return nil
	}
	return s.of(*p, p)
}

// shareBool is p as one of two pointers shared by all: nil stays nil.
func shareBool(p *bool) *bool {
	switch {
	case p == nil:
		return nil
	case *p:
		return &sharedTrue
	default:
		return &sharedFalse
	}
}

// sharedTrue and sharedFalse are what shareBool hands out; never written.
var sharedTrue, sharedFalse = true, false
