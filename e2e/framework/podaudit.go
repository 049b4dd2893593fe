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
	resourcev1 "k8s.io/api/resource/v1"
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
// make (see PodRequest); with AuditPodsAndClaims, the devices allocated
// to its ResourceClaims too. It also keeps every pod it saw, by the name of
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
	// claims, when set (AuditPodsAndClaims), follows the ResourceClaims;
	// devices holds how many devices each allocated one has, by
	// namespace/name.
	claims  *follower
	devices map[string]int64
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
	// claims are the ResourceClaims the pod uses (made from its
	// templates, or named directly), by namespace/name.
	claims []string
}

// AuditPods starts a PodAudit of resource over the namespaces of limits.
// It returns once it has listed the pods; call Stop for the result.
func AuditPods(ctx context.Context, c client.WithWatch, resource corev1.ResourceName, limits map[string]int64) (*PodAudit, error) {
	a := newPodAudit(resource, limits)
	if err := a.followPods(ctx, c); err != nil {
		return nil, err
	}
	return a, nil
}

// followPods lists the pods and follows them.
func (a *PodAudit) followPods(ctx context.Context, c client.WithWatch) error {
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
	return a.f.start(ctx)
}

// AuditPodsAndClaims is AuditPods, where a live pod holds, besides its
// requests of resource, the devices allocated to its ResourceClaims
// (status.allocation): those made from its claim templates (listed in
// its status.resourceClaimStatuses) and those it names directly, each
// claim counted once in its namespace however many pods share it. A
// claim the scheduler makes for a request of an extended resource that
// a DeviceClass backs (status.extendedResourceClaimStatus) is not
// counted again: the request is.
func AuditPodsAndClaims(ctx context.Context, c client.WithWatch, resource corev1.ResourceName, limits map[string]int64) (*PodAudit, error) {
	a := newPodAudit(resource, limits)
	a.devices = map[string]int64{}
	one := func(o runtime.Object, deleted bool) string {
		rc, ok := o.(*resourcev1.ResourceClaim)
		if !ok {
			return ""
		}
		key := rc.Namespace + "/" + rc.Name
		a.mu.Lock()
		defer a.mu.Unlock()
		if n := ClaimDevices(rc); n > 0 && !deleted {
			a.devices[key] = n
		} else {
			delete(a.devices, key)
		}
		return rc.Namespace
	}
	a.claims = &follower{c: c, newList: func() client.ObjectList { return &resourcev1.ResourceClaimList{} },
		onList: func(items []runtime.Object) {
			a.mu.Lock()
			clear(a.devices)
			a.mu.Unlock()
			namespaces := map[string]bool{}
			for _, o := range items {
				namespaces[one(o, false)] = true
			}
			for ns := range namespaces {
				a.judge(ns)
			}
		},
		onChange: func(o runtime.Object, deleted bool) {
			if ns := one(o, deleted); ns != "" {
				a.judge(ns)
			}
		}}
	if err := a.claims.start(ctx); err != nil {
		return nil, err
	}
	if err := a.followPods(ctx, c); err != nil {
		_ = a.claims.stop()
		return nil, err
	}
	return a, nil
}

// ClaimDevices counts the devices allocated to rc: 0 when it is not
// allocated.
func ClaimDevices(rc *resourcev1.ResourceClaim) int64 {
	if rc.Status.Allocation == nil {
		return 0
	}
	return int64(len(rc.Status.Allocation.Devices.Results))
}

// podClaims names the ResourceClaims pod p uses, as namespace/name.
func podClaims(p *corev1.Pod) []string {
	var out []string
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			out = append(out, p.Namespace+"/"+*s.ResourceClaimName)
		}
	}
	for _, c := range p.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			out = append(out, p.Namespace+"/"+*c.ResourceClaimName)
		}
	}
	return out
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
		ch := podCharge{ns: p.Namespace, name: p.Name, amount: PodRequest(&p.Spec, a.resource)}
		if a.devices != nil {
			ch.claims = podClaims(p)
		}
		a.live[p.UID] = ch
	}
	a.judgeLocked(p.Namespace)
}

// judge checks the pods of namespace ns against its limit.
func (a *PodAudit) judge(ns string) {
	if _, audited := a.limits[ns]; !audited {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.judgeLocked(ns)
}

func (a *PodAudit) judgeLocked(ns string) {
	sum := int64(0)
	var holders []string
	claimed := map[string]bool{}
	for _, ch := range a.live {
		if ch.ns != ns {
			continue
		}
		amount := ch.amount
		for _, c := range ch.claims {
			if !claimed[c] {
				claimed[c] = true
				amount += a.devices[c]
			}
		}
		if amount > 0 {
			sum += amount
			holders = append(holders, fmt.Sprintf("%s=%d", ch.name, amount))
		}
	}
	a.max[ns] = max(a.max[ns], sum)
	now := a.now()
	limit, tol := a.limits[ns], a.tolerate[ns]
	switch o, over := a.over[ns]; {
	case sum > limit && tol > 0:
		if !over {
			sort.Strings(holders)
			a.over[ns] = excess{at: now, what: fmt.Sprintf("%s: the pods of namespace %s ask for %d %s > %d: %s",
				now.Format("15:04:05.000"), ns, sum, a.resource, limit, strings.Join(holders, " "))}
		}
	case sum > limit:
		sort.Strings(holders)
		a.violate(fmt.Sprintf("%s: the pods of namespace %s ask for %d %s > %d: %s",
			now.Format("15:04:05.000"), ns, sum, a.resource, limit, strings.Join(holders, " ")))
	case over:
		delete(a.over, ns)
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

// Resource is the resource the audit counts.
func (a *PodAudit) Resource() corev1.ResourceName { return a.resource }

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
	if a.claims != nil {
		if cerr := a.claims.stop(); err == nil {
			err = cerr
		}
	}
	r := a.Report()
	r.Err = err
	return r
}
