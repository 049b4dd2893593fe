package queues

import "sync"

// Share hands out one copy of each distinct value among many that are
// alike: it keeps the first copy of each value it sees, by a key that
// says what the value is, and hands it out for the others. The Jobs of
// one queue mostly have the same labels, containers and usage, and each
// such value costs a map, a slice or a pointer of its own per Job, so
// what many hold is shared. A value shared is never changed: the
// informer's objects are read-only, and the ledger changes no workload's
// usage in place. A Share keeps at most ShareMax values and then starts
// again empty, so many distinct values cost what their own copies do,
// no more. Its zero value is ready to use, and it is safe for
// concurrent use.
type Share[K comparable, V any] struct {
	mu     sync.Mutex
	values map[K]V
}

// ShareMax bounds each Share.
const ShareMax = 4096

// Of is the value shared for key, which v is: v itself the first time.
func (s *Share[K, V]) Of(key K, v V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.values[key]; ok {
		return have
	}
	return s.putLocked(key, v)
}

// putLocked keeps v for key, starting again empty when full.
func (s *Share[K, V]) putLocked(key K, v V) V {
	if s.values == nil || len(s.values) >= ShareMax {
		s.values = make(map[K]V)
	}
	s.values[key] = v
	return v
}

// ofBytes is s.Of(string(key), v), but a key already kept costs no copy:
// for keys built in a buffer on a hot path.
func ofBytes[V any](s *Share[string, V], key []byte, v V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.values[string(key)]; ok {
		return have
	}
	return s.putLocked(string(key), v)
}

// Get is the value shared for key, if there is one.
func (s *Share[K, V]) Get(key K) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[key]
	return v, ok
}
