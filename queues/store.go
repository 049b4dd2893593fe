package queues

import (
	"sync"
	"sync/atomic"
)

// Store holds the Config in force. Readers call Load, which is lock-free;
// Set replaces the Config and wakes every subscriber.
type Store struct {
	cfg  atomic.Pointer[Config]
	mu   sync.Mutex
	subs []chan struct{}
}

// NewStore returns a Store holding cfg, which may be nil until a config is
// loaded.
func NewStore(cfg *Config) *Store {
	s := &Store{}
	if cfg != nil {
		s.cfg.Store(cfg)
	}
	return s
}

// Load returns the Config in force, or nil if none has loaded yet (or s
// is nil).
func (s *Store) Load() *Config {
	if s == nil {
		return nil
	}
	return s.cfg.Load()
}

// Set puts cfg in force.
func (s *Store) Set(cfg *Config) {
	s.cfg.Store(cfg)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Subscribe returns a channel that receives a value after each Set. Sends
// coalesce: a slow reader sees one value for several Sets.
func (s *Store) Subscribe() <-chan struct{} {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs = append(s.subs, c)
	s.mu.Unlock()
	return c
}
