package kinds

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/queues"
)

// A cache of Jobs holds many values alike: the Jobs of one CronJob, one
// pipeline or one user mostly have the same containers' resources and
// the same labels. Each such value costs a map or a slice of its own
// per Job (a map of one entry takes about 600 bytes), so the stripped
// copies share one of each: a share keeps the first copy of each
// distinct value it sees, and hands it out for the others. A value
// shared is never changed: the informer's objects are read-only, and
// the ledger changes none. A share keeps at most shareMax values and
// then starts again empty, so many distinct values (a user's Jobs, each
// with other requests) cost what their own copies do, no more.
type share[V any] struct {
	mu     sync.Mutex
	values map[string]V
}

// shareMax bounds each share.
const shareMax = 4096

// of is the value shared for key, which v is: v itself the first time.
func (s *share[V]) of(key string, v V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.values[key]; ok {
		return have
	}
	if s.values == nil || len(s.values) >= shareMax {
		s.values = make(map[string]V)
	}
	s.values[key] = v
	return v
}

var (
	sharedContainers share[[]corev1.Container]
	sharedMaps       share[map[string]string]
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
