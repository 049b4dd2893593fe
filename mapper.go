package main

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// newMapper is the manager's RESTMapper: controller-runtime's dynamic
// mapper, with the mappings it finds kept (memoMapper).
func newMapper(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &memoMapper{RESTMapper: m}, nil
}

// memoMapper keeps each mapping its RESTMapper found for one kind and
// version. The client maps the kind of every object it writes, and the
// dynamic mapper builds each answer anew by asking every API group it
// knows: kilobytes of garbage per write. A mapping it found stays as
// right as the dynamic mapper's own, which also keeps a group's
// resources until a kind it is asked for is missing. A failure is not
// kept: a kind whose CRD is installed later is found then.
type memoMapper struct {
	meta.RESTMapper
	found sync.Map // mappingKey → *meta.RESTMapping
}

type mappingKey struct {
	gk      schema.GroupKind
	version string
}

// RESTMapping implements meta.RESTMapper. The mapping it returns is shared
// and must not be modified, as the client does not.
func (m *memoMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	key := mappingKey{gk, versions[0]}
	if found, ok := m.found.Load(key); ok {
		return found.(*meta.RESTMapping), nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err == nil {
		m.found.Store(key, mapping)
	}
	return mapping, err
}
