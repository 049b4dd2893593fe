package framework

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodAudit checks quota from the pods alone, as the scheduler sees them,
// whatever tally's books say: at every change of a namespace's pods, the
// live ones (bound to a node and not succeeded or failed, terminating
// ones included; a pod that waits unscheduled, as behind a scheduling
// gate, holds nothing) must not
// ask for more of a resource than the namespace's limit. Each pod asks
// for its containers' requests, a limit standing for a request it does not
// make (see PodRequest). It also keeps every pod it saw, by the name of
// its controller owner, so that a test can tell whether a workload's pods
// were deleted and made again.
type PodAudit struct {
	f        follower
	resource corev1.ResourceName
	limits   map[string]int64 // by namespace

	mu         sync.Mutex
	live       map[types.UID]podCharge
	max        map[string]int64
	violations []string
	// tolerate is how long a namespace's pods may stay over its limit
	// (Tolerate); over holds when each such excess began, and brief the
	// excesses that ended within it.
	tolerate  map[string]time.Duration
	over      map[string]excess
	brief     []string
	now       func() time.Time
	owned     map[string]map[types.UID]bool // by namespace/owner name
	succeeded map[string]map[types.UID]bool // the same, of pods seen Succeeded
}

// excess is a namespace's pods over its limit since at, first seen as
// what.
type excess struct {
	at   time.Time
	what string
}

type podCharge struct {
	ns, name string
	amount   int64
}

// AuditPods starts a PodAudit of resource over the namespaces of limits.
// It returns once it has listed the pods; call Stop for the result.
func AuditPods(ctx context.Context, c client.WithWatch, resource corev1.ResourceName, limits map[string]int64) (*PodAudit, error) {
	a := newPodAudit(resource, limits)
	a.f = follower{c: c, newList: func() client.ObjectList { return &corev1.PodList{} },
		onList: func(items []runtime.Object) {
			a.mu.Lock()
			clear(a.live)
			a.mu.Unlock()
			for _, o := range items {
				a.change(o, false)
			}
		},
		onChange: a.change}
	if err := a.f.start(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// newPodAudit is a PodAudit of resource over the namespaces of limits,
// not yet fed any pod.
func newPodAudit(resource corev1.ResourceName, limits map[string]int64) *PodAudit {
	return &PodAudit{resource: resource, limits: limits, live: map[types.UID]podCharge{}, max: map[string]int64{},
		owned: map[string]map[types.UID]bool{}, succeeded: map[string]map[types.UID]bool{},
		tolerate: map[string]time.Duration{}, over: map[string]excess{}, now: time.Now}
}

func (a *PodAudit) change(o runtime.Object, deleted bool) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	if _, audited := a.limits[p.Namespace]; !audited {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ref := controllerOf(p); ref != "" {
		key := p.Namespace + "/" + ref
		if a.owned[key] == nil {
			a.owned[key] = map[types.UID]bool{}
		}
		a.owned[key][p.UID] = true
		if p.Status.Phase == corev1.PodSucceeded {
			if a.succeeded[key] == nil {
				a.succeeded[key] = map[types.UID]bool{}
			}
			a.succeeded[key][p.UID] = true
		}
	}
	if deleted || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		delete(a.live, p.UID)
	} else {
		a.live[p.UID] = podCharge{ns: p.Namespace, name: p.Name, amount: PodRequest(&p.Spec, a.resource)}
	}
	sum := int64(0)
	var holders []string
	for _, ch := range a.live {
		if ch.ns == p.Namespace && ch.amount > 0 {
			sum += ch.amount
			holders = append(holders, fmt.Sprintf("%s=%d", ch.name, ch.amount))
		}
	}
	a.max[p.Namespace] = max(a.max[p.Namespace], sum)
	now := a.now()
	limit, tol := a.limits[p.Namespace], a.tolerate[p.Namespace]
	switch o, over := a.over[p.Namespace]; {
	case sum > limit && tol > 0:
		if !over {
			sort.Strings(holders)
			a.over[p.Namespace] = excess{at: now, what: fmt.Sprintf("%s: the pods of namespace %s ask for %d %s > %d: %s",
				now.Format("15:04:05.000"), p.Namespace, sum, a.resource, limit, strings.Join(holders, " "))}
		}
	case sum > limit:
		sort.Strings(holders)
		a.violate(fmt.Sprintf("%s: the pods of namespace %s ask for %d %s > %d: %s",
			now.Format("15:04:05.000"), p.Namespace, sum, a.resource, limit, strings.Join(holders, " ")))
	case over:
		delete(a.over, p.Namespace)
		if d := now.Sub(o.at); d > tol {
			a.violate(fmt.Sprintf("%s, for %s, longer than the %s tolerated", o.what, d.Round(time.Millisecond), tol))
		} else {
			a.brief = append(a.brief, fmt.Sprintf("%s, for %s", o.what, d.Round(time.Millisecond)))
		}
	}
}

// violate records violation v, up to maxViolations of them.
func (a *PodAudit) violate(v string) {
	if len(a.violations) < maxViolations {
		a.violations = append(a.violations, v)
	}
}

// Tolerate lets the pods of namespace ns stay over its limit for up to d
// at a time: a longer excess is a violation (judged when it ends, or by
// Report while it lasts), a shorter one is reported as Brief. A namespace
// where tally admits with a stated window of excess (the pods of one
// workload whose creates the gate judged at once run until the ledger
// deletes the extra ones) is audited this way.
func (a *PodAudit) Tolerate(ns string, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tolerate[ns] = d
}

// controllerOf names a pod's controller owner, "" if it has none.
func controllerOf(p *corev1.Pod) string {
	for _, r := range p.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return r.Name
		}
	}
	return ""
}

// PodAuditReport is what a PodAudit saw.
type PodAuditReport struct {
	// Violations describes the states that exceeded a limit.
	Violations []string
	// Brief describes the excesses that ended within what Tolerate
	// allowed.
	Brief []string
	// Max is the most each namespace's live pods asked for at once.
	Max map[string]int64
	// Gaps counts re-lists; states in a gap were not checked.
	Gaps int
	Err  error
}

// Report returns what was seen so far.
func (a *PodAudit) Report() PodAuditReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	violations := slices.Clone(a.violations)
	now := a.now()
	for ns, o := range a.over {
		if d := now.Sub(o.at); d > a.tolerate[ns] {
			violations = append(violations, fmt.Sprintf("%s, for %s so far, longer than the %s tolerated", o.what, d.Round(time.Millisecond), a.tolerate[ns]))
		}
	}
	return PodAuditReport{Violations: violations, Brief: slices.Clone(a.brief), Max: maps.Clone(a.max), Gaps: a.f.Gaps()}
}

// PodsOf counts the pods seen whose controller owner is ns/owner, live or
// gone.
func (a *PodAudit) PodsOf(ns, owner string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.owned[ns+"/"+owner])
}

// SucceededOf counts the pods seen Succeeded whose controller owner is
// ns/owner.
func (a *PodAudit) SucceededOf(ns, owner string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.succeeded[ns+"/"+owner])
}

// Stop ends the watch and returns the report.
func (a *PodAudit) Stop() PodAuditReport {
	err := a.f.stop()
	r := a.Report()
	r.Err = err
	return r
}
