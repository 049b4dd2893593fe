package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the RESTMapping calls that reach it.
type countingMapper struct {
	*meta.DefaultRESTMapper
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	return c.DefaultRESTMapper.RESTMapping(gk, versions...)
}

func TestMemoMapperKeepsFoundMappings(t *testing.T) {
	job := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	ray := schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"}
	inner := &countingMapper{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	inner.Add(job, meta.RESTScopeNamespace)
	m := &memoMapper{RESTMapper: inner}

	first, err := m.RESTMapping(job.GroupKind(), job.Version)
	if err != nil {
		t.Fatal(err)
	}
	if first.Resource.Resource != "jobs" {
		t.Fatalf("resource %q, want jobs", first.Resource.Resource)
	}
	again, err := m.RESTMapping(job.GroupKind(), job.Version)
	if err != nil || again != first {
		t.Fatalf("second mapping %v, %v: want the first one kept", again, err)
	}
	if inner.calls != 1 {
		t.Fatalf("the inner mapper was asked %d times, want 1", inner.calls)
	}

	// A kind not installed yet fails, and is found once it is.
	if _, err := m.RESTMapping(ray.GroupKind(), ray.Version); !meta.IsNoMatchError(err) {
		t.Fatalf("RayJob before its CRD: %v, want a no-match error", err)
	}
	inner.Add(ray, meta.RESTScopeNamespace)
	got, err := m.RESTMapping(ray.GroupKind(), ray.Version)
	if err != nil || got == nil || got.Resource.Resource != "rayjobs" {
		t.Fatalf("RayJob after its CRD: %v, %v", got, err)
	}

	// Other versions are their own keys; several versions pass through.
	calls := inner.calls
	for range 2 {
		if _, err := m.RESTMapping(job.GroupKind(), "v2", job.Version); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.RESTMapping(job.GroupKind(), "v2"); !meta.IsNoMatchError(err) {
		t.Fatalf("batch/v2 Job: %v, want a no-match error", err)
	}
	if inner.calls != calls+3 {
		t.Fatalf("the inner mapper was asked %d more times, want 3", inner.calls-calls)
	}
}
