package queues

import (
	"fmt"
	"math"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kueue's own Configuration document (config.kueue.x-k8s.io), of which
// tally reads the waitForPodsReady section and the feature gate that
// turns it off, and warns about every other section.
const (
	kindConfiguration    = "Configuration"
	configurationV1beta1 = "config.kueue.x-k8s.io/v1beta1"
	configurationV1beta2 = "config.kueue.x-k8s.io/v1beta2"
	gateDisablePodsReady = "DisableWaitForPodsReady"
)

// The values of waitForPodsReady.requeuingStrategy.timestamp: the time a
// requeued workload is ordered by in its queue.
const (
	// EvictionTimestamp orders it by its eviction for PodsReadyTimeout.
	EvictionTimestamp = "Eviction"
	// CreationTimestamp orders it by its creation.
	CreationTimestamp = "Creation"
)

// Kueue's defaults for waitForPodsReady, from sigs.k8s.io/kueue
// apis/config/v1beta1/defaults.go and apis/config/v1beta2/defaults.go
// (SetDefaults_Configuration, Kueue v0.19).
const (
	// defaultPodsReadyTimeoutV1beta1 applies when enable is true and
	// timeout is left out (v1beta1's defaultPodsReadyTimeout).
	defaultPodsReadyTimeoutV1beta1 = 5 * time.Minute
	// defaultPodsReadyTimeoutV1beta2 applies when timeout is left out
	// or 0 (v1beta2's DefaultWaitForPodsReadyTimeout).
	defaultPodsReadyTimeoutV1beta2 = 30 * time.Minute
	defaultBackoffBaseSeconds      = 60
	defaultBackoffMaxSeconds       = 3600
)

// PodsReady is Kueue's waitForPodsReady: an admitted workload whose pods
// are not all ready within Timeout is evicted and requeued after a
// backoff. The defaults are applied; nil in Config.PodsReady means off.
type PodsReady struct {
	// Timeout is how long an admitted workload may take to have all its
	// pods ready.
	Timeout time.Duration
	// RecoveryTimeout is how long a running workload may have fewer pods
	// ready than it needs before it is evicted too; 0 is off. It
	// defaults to Timeout.
	RecoveryTimeout time.Duration
	// BlockAdmission holds every admission while an admitted workload's
	// pods are not yet ready. v1beta1 defaults it to true, v1beta2 to
	// false.
	BlockAdmission bool
	// Timestamp is EvictionTimestamp (the default) or CreationTimestamp.
	Timestamp string
	// BackoffLimitCount is how many times a workload is requeued: at the
	// timeout after that many requeues it is set aside instead. nil: no
	// limit.
	BackoffLimitCount *int32
	// BackoffBase is the wait before the first requeue (default 60s);
	// each later one doubles it.
	BackoffBase time.Duration
	// BackoffMax caps the wait (default 3600s); 0 leaves it uncapped,
	// as in Kueue.
	BackoffMax time.Duration
}

// Backoff is the wait before the n-th requeue (n ≥ 1), as Kueue computes
// it (sigs.k8s.io/kueue pkg/workload/workload.go UpdateRequeueState, on
// pkg/util/wait/backoff.go): BackoffBase·2^(n-1), capped at BackoffMax
// from the second requeue on (the first is BackoffBase even when that is
// larger). Kueue adds a random jitter of at most 0.01% (0.36s on an
// hour); it is left out here, so that the wait is deterministic. n < 1
// waits 0.
func (p *PodsReady) Backoff(n int32) time.Duration {
	if n < 1 {
		return 0
	}
	limit := p.BackoffMax
	if limit <= 0 {
		// Kueue's cap when none is given: math.MaxInt64 / factor.
		limit = math.MaxInt64 / 2
	}
	d := p.BackoffBase
	for i := int32(1); i < n && d > 0; i++ {
		if d > limit/2 {
			return limit
		}
		d *= 2
	}
	return d
}

// Order returns w ordered in its queue as the requeuingStrategy.timestamp
// of p says: by Evicted (Eviction, the default; also when p is nil, as
// Kueue orders by it whether or not waitForPodsReady is on), or by
// Created (Creation). It returns w itself when that is already so, else
// a copy; w's pod sets and constraints are shared. A workload that has
// no such eviction (Evicted zero) is ordered by Created either way.
func (p *PodsReady) Order(w *Workload) *Workload {
	byCreation := p != nil && p.Timestamp == CreationTimestamp
	if w.ByCreation == byCreation || w.Evicted.IsZero() {
		return w
	}
	out := *w
	out.ByCreation = byCreation
	if out.total != nil {
		out.queued = out.QueueTime().UnixNano()
	}
	return &out
}

// PodsReadyEvictedAt reads, from a workload's metadata, when it was last
// evicted because its pods were not ready in time, if that eviction is
// its latest: its AnnotationEvictedAt, unless its AnnotationAdmittedAt is
// later (it was admitted again since; an eviction of another cause after
// that leaves it ordered by its creation, as in Kueue, whose Evicted
// condition then gives another reason). The zero time otherwise, and for
// a time before its creation, which no eviction has: ordered by it, a
// workload created with the annotation would pass those created before
// it. Both annotations have whole seconds; the eviction never comes
// before the admission it ends, and a readmission comes at least a second
// later, at the end of the backoff (see PodsReady.Backoff), unless the
// backoff is 0.
func PodsReadyEvictedAt(meta *metav1.ObjectMeta) time.Time {
	s := meta.Annotations[AnnotationEvictedAt]
	if s == "" {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil || at.Before(meta.CreationTimestamp.Time) {
		return time.Time{}
	}
	if admitted, err := time.Parse(time.RFC3339, meta.Annotations[AnnotationAdmittedAt]); err == nil && admitted.After(at) {
		return time.Time{}
	}
	return at
}

// rawConfiguration is a Configuration document: only what tally reads.
// Every other field is reported as unused (see unusedConfigurationField).
type rawConfiguration struct {
	APIVersion       string               `json:"apiVersion"`
	Kind             string               `json:"kind"`
	WaitForPodsReady *rawWaitForPodsReady `json:"waitForPodsReady"`
	FeatureGates     map[string]bool      `json:"featureGates"`
	Resources        *rawResources        `json:"resources"`
}

type rawWaitForPodsReady struct {
	// Enable is v1beta1's; in v1beta2 the section is on by itself.
	Enable *bool `json:"enable"`
	// The durations keep their text, so that a bad one is reported with
	// its path.
	Timeout           *string               `json:"timeout"`
	RecoveryTimeout   *string               `json:"recoveryTimeout"`
	BlockAdmission    *bool                 `json:"blockAdmission"`
	RequeuingStrategy *rawRequeuingStrategy `json:"requeuingStrategy"`
}

type rawRequeuingStrategy struct {
	Timestamp          *string `json:"timestamp"`
	BackoffLimitCount  *int32  `json:"backoffLimitCount"`
	BackoffBaseSeconds *int32  `json:"backoffBaseSeconds"`
	BackoffMaxSeconds  *int32  `json:"backoffMaxSeconds"`
}

// podsReadyOf applies Kueue's defaults to a Configuration's
// waitForPodsReady and checks it as Kueue does (pkg/config/validation.go
// validateWaitForPodsReady): values are checked only when the section is
// on, but a duration that does not parse is an error either way, as it is
// when Kueue decodes the document. It returns nil when the section is off.
//
// v1beta1 turns it on with enable: true. v1beta2 has no enable field: as
// in Kueue v0.19, a v1beta2 Configuration turns it on even without the
// section, unless featureGates.DisableWaitForPodsReady is true.
func podsReadyOf(c *rawConfiguration, root *field.Path) (*PodsReady, field.ErrorList) {
	p := root.Child("waitForPodsReady")
	w := c.WaitForPodsReady
	if w == nil {
		w = &rawWaitForPodsReady{}
	}
	v1beta2 := c.APIVersion == configurationV1beta2
	var errs field.ErrorList
	if v1beta2 && w.Enable != nil {
		errs = append(errs, field.Forbidden(p.Child("enable"),
			"v1beta2 has no enable field: the section is on by itself; use featureGates.DisableWaitForPodsReady: true to turn it off"))
	}
	timeout, timeoutErrs := parseDuration(p.Child("timeout"), w.Timeout)
	recovery, recoveryErrs := parseDuration(p.Child("recoveryTimeout"), w.RecoveryTimeout)
	errs = append(append(errs, timeoutErrs...), recoveryErrs...)
	on := v1beta2 || w.Enable != nil && *w.Enable
	if c.FeatureGates[gateDisablePodsReady] {
		on = false
	}
	if !on || len(errs) > 0 {
		return nil, errs
	}

	pr := &PodsReady{Timeout: timeout, RecoveryTimeout: recovery, BlockAdmission: !v1beta2,
		Timestamp: EvictionTimestamp, BackoffBase: defaultBackoffBaseSeconds * time.Second, BackoffMax: defaultBackoffMaxSeconds * time.Second}
	switch {
	case timeout < 0:
		errs = append(errs, field.Invalid(p.Child("timeout"), *w.Timeout, "must not be negative"))
	case v1beta2 && timeout == 0:
		pr.Timeout = defaultPodsReadyTimeoutV1beta2
	case w.Timeout == nil:
		pr.Timeout = defaultPodsReadyTimeoutV1beta1
	case timeout == 0:
		errs = append(errs, field.Required(p.Child("timeout"), "must be more than 0"))
	}
	switch {
	case recovery < 0:
		errs = append(errs, field.Invalid(p.Child("recoveryTimeout"), *w.RecoveryTimeout, "must not be negative; 0s turns it off"))
	case w.RecoveryTimeout == nil:
		pr.RecoveryTimeout = pr.Timeout
	}
	if w.BlockAdmission != nil {
		pr.BlockAdmission = *w.BlockAdmission
	}
	if s := w.RequeuingStrategy; s != nil {
		sp := p.Child("requeuingStrategy")
		if s.Timestamp != nil {
			pr.Timestamp = *s.Timestamp
			errs = append(errs, validateTimestamp(sp.Child("timestamp"), *s.Timestamp)...)
		}
		pr.BackoffLimitCount = s.BackoffLimitCount
		errs = append(errs, validateNotNegative(sp.Child("backoffLimitCount"), s.BackoffLimitCount)...)
		errs = append(errs, validateNotNegative(sp.Child("backoffBaseSeconds"), s.BackoffBaseSeconds)...)
		errs = append(errs, validateNotNegative(sp.Child("backoffMaxSeconds"), s.BackoffMaxSeconds)...)
		if s.BackoffBaseSeconds != nil {
			pr.BackoffBase = time.Duration(*s.BackoffBaseSeconds) * time.Second
		}
		if s.BackoffMaxSeconds != nil {
			pr.BackoffMax = time.Duration(*s.BackoffMaxSeconds) * time.Second
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return pr, nil
}

// parseDuration parses a duration as metav1.Duration does; nil is 0.
func parseDuration(p *field.Path, s *string) (time.Duration, field.ErrorList) {
	if s == nil {
		return 0, nil
	}
	d, err := time.ParseDuration(*s)
	if err != nil {
		return 0, field.ErrorList{invalidf(p, *s, "%q is not a duration such as 5m or 90s", Shorten(*s))}
	}
	return d, nil
}

func validateTimestamp(p *field.Path, v string) field.ErrorList {
	if v == EvictionTimestamp || v == CreationTimestamp {
		return nil
	}
	return field.ErrorList{withDetail(field.NotSupported(p, v, []string{EvictionTimestamp, CreationTimestamp}),
		"unsupported value %q: must be one of %s, %s", Shorten(v), EvictionTimestamp, CreationTimestamp)}
}

func validateNotNegative(p *field.Path, v *int32) field.ErrorList {
	if v == nil || *v >= 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, *v, "must not be negative")}
}

// validateConfigurationHeader checks a Configuration document's
// apiVersion: Kueue's config group, not its API group.
func validateConfigurationHeader(h *header, root *field.Path) field.ErrorList {
	versions := []string{configurationV1beta1, configurationV1beta2}
	if h.APIVersion == configurationV1beta1 || h.APIVersion == configurationV1beta2 {
		return nil
	}
	if h.APIVersion == "" {
		return field.ErrorList{field.Required(root.Child("apiVersion"), "is required: one of "+strings.Join(versions, ", "))}
	}
	return field.ErrorList{withDetail(field.NotSupported(root.Child("apiVersion"), h.APIVersion, versions),
		"unsupported apiVersion %q for kind Configuration: must be one of %s", Shorten(h.APIVersion), strings.Join(versions, ", "))}
}

// validateConfiguration checks a Configuration document, and that no
// earlier one is in seen.
func validateConfiguration(d *document, seen map[string]*document) field.ErrorList {
	var errs field.ErrorList
	if first, dup := seen[kindConfiguration]; dup {
		errs = append(errs, withDetail(field.Duplicate(d.root, nil),
			"a config holds at most one Configuration document: there is one in %s and another in %s", first.where, d.where))
	} else {
		seen[kindConfiguration] = d
	}
	if !d.broken {
		_, found := podsReadyOf(d.conf, d.root)
		errs = append(errs, found...)
		errs = append(errs, validateDeviceClassMappings(d.conf.Resources, d.root)...)
	}
	return errs
}

// configurationWarnings are the remarks on a decoded Configuration
// document beyond its unknown fields: the feature gates tally does not
// read, and a v1beta2 section left out, which Kueue turns on anyway.
func configurationWarnings(c *rawConfiguration, root *field.Path) []string {
	var out []string
	for _, gate := range SortedKeys(c.FeatureGates) {
		if gate != gateDisablePodsReady {
			out = append(out, fmt.Sprintf("%s: tally does not read this feature gate", root.Child("featureGates").Key(gate)))
		}
	}
	if c.APIVersion == configurationV1beta2 && c.WaitForPodsReady == nil && !c.FeatureGates[gateDisablePodsReady] {
		out = append(out, fmt.Sprintf("%s: left out, so on with Kueue's v1beta2 defaults (timeout 30m); set featureGates.%s: true to turn it off",
			root.Child("waitForPodsReady"), gateDisablePodsReady))
	}
	return out
}

// unusedConfigurationField words the warning for a field of a
// Configuration document that tally does not read, with tally's
// equivalent where there is one. path is the field's dotted path.
func unusedConfigurationField(root *field.Path, path string) string {
	section, _, _ := strings.Cut(path, ".")
	if strings.HasPrefix(path, "waitForPodsReady.") {
		return fmt.Sprintf("%s.%s: unknown field, ignored", root, path)
	}
	hint := ""
	switch section {
	case "integrations":
		hint = "; tally queues Jobs, its built-in kinds (JobSet, Kubeflow jobs, MPIJob, RayJob, TrainJob, Pods) and the kinds WorkloadKind documents declare"
	case "manageJobsWithoutQueueName", "managedJobsNamespaceSelector":
		hint = "; in tally, a namespace bound by the tally.dev/cluster-queue annotation, or with a LocalQueue named default, queues its Jobs that have no queue label"
	case "fairSharing", "admissionFairSharing":
		hint = "; fair sharing is on for a tree of cohorts when one of its ClusterQueues or Cohorts has spec.fairSharing, with both preemption strategies"
	case "namespace", "webhook", "leaderElection", "metrics", "health", "clientConnection", "internalCertManagement",
		"pprofBindAddress", "controller", "tls":
		hint = "; tally serve's command-line flags cover it"
	}
	return fmt.Sprintf("%s.%s: tally does not read this section%s", root, path, hint)
}
