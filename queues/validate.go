package queues

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxFairWeight bounds fairSharing.weight, so that it fits in thousandths.
const maxFairWeight = 1_000_000

// Kueue's limits on the lists of a ClusterQueue. They also bound the work
// validation does on a hostile config.
const (
	maxResourceGroups = 16
	maxGroupFlavors   = 64
	maxResources      = 64
)

// maxTopologyLevels is Kueue's limit on a Topology's levels.
const maxTopologyLevels = 16

// hostnameLabel is the node label that names one node: a Topology may
// have it only as its lowest level.
const hostnameLabel = corev1.LabelHostname

// maxErrors is the most errors, and the most warnings, Parse returns, so
// that a webhook response stays readable.
const maxErrors = 100

// FormatErrors renders each error as "<field path>: <what is wrong>", e.g.
// `ClusterQueue "a".spec.resourceGroups[0].flavors[1].name: flavor "x" is not defined`.
func FormatErrors(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		detail := e.Detail
		if detail == "" {
			detail = e.ErrorBody()
		}
		out = append(out, e.Field+": "+detail)
	}
	return out
}

func withDetail(e *field.Error, format string, args ...any) *field.Error {
	e.Detail = fmt.Sprintf(format, args...)
	return e
}

func invalidf(p *field.Path, value any, format string, args ...any) *field.Error {
	return field.Invalid(p, value, fmt.Sprintf(format, args...))
}

func required(p *field.Path) *field.Error { return field.Required(p, "is required") }

// validateEnum checks an optional field against its values; "" is the
// default and always valid.
func validateEnum(p *field.Path, v string, allowed ...string) field.ErrorList {
	if v == "" || sets.New(allowed...).Has(v) {
		return nil
	}
	return field.ErrorList{withDetail(field.NotSupported(p, v, allowed),
		"unsupported value %q: must be one of %s", v, strings.Join(allowed, ", "))}
}

// validateHeader checks a document's apiVersion and kind.
func validateHeader(h *header, root *field.Path) field.ErrorList {
	if h.Kind == kindConfiguration {
		return validateConfigurationHeader(h, root)
	}
	var errs field.ErrorList
	versions := supportedAPIVersions()
	if h.Kind == kindTopology {
		versions = append(versions, topologyAlphaVersion)
	}
	switch {
	case h.APIVersion == "":
		errs = append(errs, field.Required(root.Child("apiVersion"), "is required: one of "+strings.Join(versions, ", ")))
	case !sets.New(versions...).Has(h.APIVersion):
		errs = append(errs, withDetail(field.NotSupported(root.Child("apiVersion"), h.APIVersion, versions),
			"unsupported apiVersion %q: must be one of %s", h.APIVersion, strings.Join(versions, ", ")))
	}
	kinds := supportedKinds()
	switch {
	case h.Kind == "":
		errs = append(errs, field.Required(root.Child("kind"), "is required: one of "+strings.Join(kinds, ", ")))
	case !isSupportedKind(h.Kind):
		errs = append(errs, withDetail(field.NotSupported(root.Child("kind"), h.Kind, kinds),
			"unknown kind %q: must be one of %s", h.Kind, strings.Join(kinds, ", ")))
	}
	return errs
}

func isSupportedKind(kind string) bool {
	return kind == kindConfiguration || sets.New(supportedKinds()...).Has(kind)
}

// validateDocuments checks every document, in order, and the references
// between them.
func validateDocuments(docs []*document) field.ErrorList {
	flavorNames, queueNames, topologyNames := sets.New[string](), sets.New[string](), sets.New[string]()
	for _, d := range docs {
		switch d.kind {
		case kindResourceFlavor:
			flavorNames.Insert(d.key)
		case kindClusterQueue:
			queueNames.Insert(d.key)
		case kindTopology:
			topologyNames.Insert(d.key)
		}
	}
	var errs field.ErrorList
	seen, declared := map[string]*document{}, map[string]*document{}
	for _, d := range docs {
		errs = append(errs, validateUnique(d, seen)...)
		if d.kind == kindConfiguration {
			errs = append(errs, validateConfiguration(d, seen)...)
		}
		if d.broken {
			continue
		}
		switch d.kind {
		case kindResourceFlavor:
			errs = append(errs, validateFlavor(d.flavor, d.root, topologyNames)...)
		case kindTopology:
			errs = append(errs, validateTopology(d.topo, d.root)...)
		case kindClusterQueue:
			errs = append(errs, validateClusterQueue(d.cq, d.root, flavorNames)...)
		case kindCohort:
			errs = append(errs, validateCohortDocument(d.co, d.root, flavorNames)...)
		case kindLocalQueue:
			errs = append(errs, validateLocalQueue(d.lq, d.root, queueNames)...)
		case kindWorkloadPriorityClass:
			errs = append(errs, validatePriorityClass(d.wpc, d.root)...)
		case kindWorkloadKind:
			errs = append(errs, validateWorkloadKind(d.wk, d.root)...)
			gvk := d.wk.Spec.Group + "/" + d.wk.Spec.Version + "/" + d.wk.Spec.Kind
			if first, dup := declared[gvk]; dup {
				errs = append(errs, withDetail(field.Duplicate(d.root.Child("spec", "kind"), d.wk.Spec.Kind),
					"%s is declared twice: in %s and %s", gvk, first.where, d.where))
			} else {
				declared[gvk] = d
			}
		}
	}
	return append(errs, validateCohortTree(docs)...)
}

// validateUnique reports a document whose kind and name an earlier one
// already has.
func validateUnique(d *document, seen map[string]*document) field.ErrorList {
	if d.key == "" {
		return nil
	}
	id := d.kind + "/" + d.key
	first, dup := seen[id]
	if !dup {
		seen[id] = d
		return nil
	}
	return field.ErrorList{withDetail(field.Duplicate(d.root.Child("metadata", "name"), d.key),
		"%s %q is defined twice: in %s and %s", d.kind, d.key, first.where, d.where)}
}

// validateObjectMeta checks metadata.name and, for a namespaced kind,
// metadata.namespace.
func validateObjectMeta(m *metav1.ObjectMeta, root *field.Path, namespaced bool) field.ErrorList {
	p := root.Child("metadata")
	errs := validateDNSName(p.Child("name"), m.Name, "name", true)
	if namespaced {
		if m.Namespace == "" {
			errs = append(errs, required(p.Child("namespace")))
		} else if msgs := validation.IsDNS1123Label(m.Namespace); len(msgs) > 0 {
			errs = append(errs, invalidf(p.Child("namespace"), m.Namespace, "%q is not a valid namespace: %s", m.Namespace, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// validateDNSName checks an object name or a reference to one: a DNS-1123
// subdomain. what names it in the message ("name", "cohort name").
func validateDNSName(p *field.Path, name, what string, isRequired bool) field.ErrorList {
	if name == "" {
		if isRequired {
			return field.ErrorList{required(p)}
		}
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{invalidf(p, name, "%q is not a valid %s: %s", name, what, strings.Join(msgs, "; "))}
	}
	return nil
}

func validateResourceName(p *field.Path, r corev1.ResourceName) field.ErrorList {
	if len(validation.IsQualifiedName(string(r))) > 0 {
		return field.ErrorList{invalidf(p, string(r),
			"%q is not a valid resource name: it must be a qualified name such as cpu, memory or example.com/gpu", r)}
	}
	return nil
}

// ResourceFlavor.

func validateFlavor(f *rawResourceFlavor, root *field.Path, topologyNames sets.Set[string]) field.ErrorList {
	spec := root.Child("spec")
	errs := validateObjectMeta(&f.Metadata, root, false)
	errs = append(errs, validateNodeLabels(f.Spec.NodeLabels, spec.Child("nodeLabels"))...)
	errs = append(errs, validateNodeLabels(f.Spec.NodeSelector, spec.Child("nodeSelector"))...)
	errs = append(errs, validateAlias(f.Spec.NodeLabels, f.Spec.NodeSelector, spec.Child("nodeSelector"))...)
	errs = append(errs, validateTaints(f.Spec.NodeTaints, spec.Child("nodeTaints"))...)
	errs = append(errs, validateTolerations(f.Spec.Tolerations, spec.Child("tolerations"))...)
	if t := f.Spec.TopologyName; t != "" && !topologyNames.Has(t) {
		errs = append(errs, withDetail(field.NotFound(spec.Child("topologyName"), t), "Topology %q is not defined", t))
	}
	if v, ok := f.Metadata.Annotations[AnnotationNodeFit]; ok {
		p := root.Child("metadata", "annotations").Key(AnnotationNodeFit)
		switch {
		case v != "true":
			errs = append(errs, invalidf(p, v, "%q: the only value is \"true\" (each pod of a workload must fit on one of the flavor's nodes); remove the annotation for no node-level fit", v))
		case f.Spec.TopologyName != "":
			errs = append(errs, invalidf(p, v, "the flavor has a Topology (spec.topologyName): make kubernetes.io/hostname its lowest level for node-level fit, and remove the annotation"))
		}
	}
	return errs
}

func validateNodeLabels(l map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range SortedKeys(l) {
		errs = append(errs, validateLabelKey(p.Key(k), k)...)
		errs = append(errs, validateLabelValue(p.Key(k), l[k])...)
	}
	return errs
}

func validateLabelKey(p *field.Path, k string) field.ErrorList {
	if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
		return field.ErrorList{invalidf(p, k, "%q is not a valid label key: %s", k, strings.Join(msgs, "; "))}
	}
	return nil
}

func validateLabelValue(p *field.Path, v string) field.ErrorList {
	if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
		return field.ErrorList{invalidf(p, v, "%q is not a valid label value: %s", v, strings.Join(msgs, "; "))}
	}
	return nil
}

// validateAlias reports nodeSelector keys whose value differs from the
// same key in nodeLabels.
func validateAlias(nodeLabels, nodeSelector map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range SortedKeys(nodeSelector) {
		if v, ok := nodeLabels[k]; ok && v != nodeSelector[k] {
			errs = append(errs, invalidf(p.Key(k), nodeSelector[k], "%q conflicts with %q in spec.nodeLabels", nodeSelector[k], v))
		}
	}
	return errs
}

func taintEffects() []string {
	return []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}
}

func validateTaints(taints []corev1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range taints {
		t, tp := &taints[i], p.Index(i)
		if t.Key == "" {
			errs = append(errs, required(tp.Child("key")))
		} else {
			errs = append(errs, validateLabelKey(tp.Child("key"), t.Key)...)
		}
		errs = append(errs, validateLabelValue(tp.Child("value"), t.Value)...)
		if t.Effect == "" {
			errs = append(errs, field.Required(tp.Child("effect"), "is required: one of "+strings.Join(taintEffects(), ", ")))
		} else {
			errs = append(errs, validateEnum(tp.Child("effect"), string(t.Effect), taintEffects()...)...)
		}
	}
	return errs
}

func validateTolerations(tolerations []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range tolerations {
		t, tp := &tolerations[i], p.Index(i)
		errs = append(errs, validateEnum(tp.Child("operator"), string(t.Operator), "Equal", "Exists")...)
		switch {
		case t.Key == "" && t.Operator != corev1.TolerationOpExists:
			errs = append(errs, invalidf(tp.Child("operator"), string(t.Operator), "must be Exists when key is empty"))
		case t.Key != "":
			errs = append(errs, validateLabelKey(tp.Child("key"), t.Key)...)
		}
		if t.Operator == corev1.TolerationOpExists && t.Value != "" {
			errs = append(errs, invalidf(tp.Child("value"), t.Value, "must be empty when operator is Exists"))
		} else {
			errs = append(errs, validateLabelValue(tp.Child("value"), t.Value)...)
		}
		errs = append(errs, validateEnum(tp.Child("effect"), string(t.Effect), taintEffects()...)...)
	}
	return errs
}

// Topology.

// validateTopology checks a Topology's levels as Kueue does: 1 to 16
// valid label keys, each once, with kubernetes.io/hostname only as the
// lowest.
func validateTopology(t *rawTopology, root *field.Path) field.ErrorList {
	errs := validateObjectMeta(&t.Metadata, root, false)
	p, levels := root.Child("spec", "levels"), t.Spec.Levels
	switch {
	case len(levels) == 0:
		return append(errs, field.Required(p, "must list at least one level"))
	case len(levels) > maxTopologyLevels:
		return append(errs, withDetail(field.TooMany(p, len(levels), maxTopologyLevels),
			"has %d levels, more than %d", len(levels), maxTopologyLevels))
	}
	listedAt := map[string]int{}
	for i, l := range levels {
		lp := p.Index(i).Child("nodeLabel")
		first, dup := listedAt[l.NodeLabel]
		switch {
		case l.NodeLabel == "":
			errs = append(errs, required(lp))
		case dup:
			errs = append(errs, withDetail(field.Duplicate(lp, l.NodeLabel), "node label %q is already listed in levels[%d]", l.NodeLabel, first))
		case l.NodeLabel == hostnameLabel && i != len(levels)-1:
			errs = append(errs, invalidf(lp, l.NodeLabel, "%q may only be the lowest (last) level", hostnameLabel))
		default:
			errs = append(errs, validateLabelKey(lp, l.NodeLabel)...)
		}
		if !dup {
			listedAt[l.NodeLabel] = i
		}
	}
	return errs
}

// ClusterQueue.

func validateClusterQueue(cq *rawClusterQueue, root *field.Path, flavorNames sets.Set[string]) field.ErrorList {
	s, spec := &cq.Spec, root.Child("spec")
	errs := validateObjectMeta(&cq.Metadata, root, false)
	errs = append(errs, validateCohort(s, spec)...)
	errs = append(errs, validateNamespaceSelector(s.NamespaceSelector, spec.Child("namespaceSelector"))...)
	errs = append(errs, validateEnum(spec.Child("queueingStrategy"), s.QueueingStrategy, string(BestEffortFIFO), string(StrictFIFO))...)
	errs = append(errs, validatePreemption(s.Preemption, spec.Child("preemption"))...)
	errs = append(errs, validateFungibility(s.FlavorFungibility, spec.Child("flavorFungibility"))...)
	errs = append(errs, validateFairSharing(s.FairSharing, spec.Child("fairSharing"))...)
	errs = append(errs, validateEnum(spec.Child("stopPolicy"), s.StopPolicy, defaultStopPolicy, "Hold", "HoldAndDrain")...)
	errs = append(errs, validateResourceGroups(s.ResourceGroups, spec.Child("resourceGroups"), flavorNames, quotaOwner{linked: cohortOf(s) != "", unlinked: "the ClusterQueue has no cohort"})...)
	return errs
}

// validateCohort accepts cohort (v1beta1) or cohortName (v1beta2), or both
// when they agree. A cohort may share a ClusterQueue's name, as in Kueue.
func validateCohort(s *rawClusterQueueSpec, spec *field.Path) field.ErrorList {
	if s.Cohort != "" && s.CohortName != "" && s.Cohort != s.CohortName {
		return field.ErrorList{invalidf(spec.Child("cohortName"), s.CohortName,
			"%q differs from spec.cohort %q: set one of them", s.CohortName, s.Cohort)}
	}
	if s.Cohort != "" {
		return validateDNSName(spec.Child("cohort"), s.Cohort, "cohort name", false)
	}
	return validateDNSName(spec.Child("cohortName"), s.CohortName, "cohort name", false)
}

// validateNamespaceSelector checks a label selector. Its errors come from
// apimachinery; their whole message becomes the detail.
func validateNamespaceSelector(ls *metav1.LabelSelector, p *field.Path) field.ErrorList {
	found := metav1validation.ValidateLabelSelector(ls, metav1validation.LabelSelectorValidationOptions{}, p)
	sort.SliceStable(found, func(i, j int) bool { return found[i].Field < found[j].Field })
	errs := make(field.ErrorList, 0, len(found))
	for _, e := range found {
		errs = append(errs, &field.Error{Type: e.Type, Field: e.Field, BadValue: field.OmitValueType{}, Detail: e.ErrorBody()})
	}
	if len(errs) == 0 && ls != nil {
		if _, err := metav1.LabelSelectorAsSelector(ls); err != nil {
			errs = append(errs, invalidf(p, field.OmitValueType{}, "%v", err))
		}
	}
	return errs
}

func validatePreemption(pr *rawPreemption, p *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	errs := validateEnum(p.Child("withinClusterQueue"), pr.WithinClusterQueue,
		PreemptNever, PreemptLowerPriority, PreemptLowerOrNewerEqualPriority)
	errs = append(errs, validateEnum(p.Child("reclaimWithinCohort"), pr.ReclaimWithinCohort,
		PreemptNever, PreemptLowerPriority, PreemptAny)...)
	b := pr.BorrowWithinCohort
	if b == nil {
		return errs
	}
	bp := p.Child("borrowWithinCohort")
	errs = append(errs, validateEnum(bp.Child("policy"), b.Policy, PreemptNever, PreemptLowerPriority)...)
	if b.Policy == PreemptLowerPriority && orDefault(pr.ReclaimWithinCohort, PreemptNever) == PreemptNever {
		errs = append(errs, invalidf(bp.Child("policy"), b.Policy, "must be Never when reclaimWithinCohort is Never"))
	}
	if !isUnset(b.MaxPriorityThreshold) {
		errs = append(errs, validateInt32(bp.Child("maxPriorityThreshold"), b.MaxPriorityThreshold)...)
	}
	return errs
}

func validateFungibility(f *rawFungibility, p *field.Path) field.ErrorList {
	if f == nil {
		return nil
	}
	errs := validateEnum(p.Child("whenCanBorrow"), f.WhenCanBorrow, "Borrow", "TryNextFlavor", mayStopSearch)
	return append(errs, validateEnum(p.Child("whenCanPreempt"), f.WhenCanPreempt, "TryNextFlavor", "Preempt", mayStopSearch)...)
}

func validateFairSharing(fs *rawFairSharing, p *field.Path) field.ErrorList {
	if fs == nil || isUnset(fs.Weight) {
		return nil
	}
	wp := p.Child("weight")
	w, ok, errs := checkQuantity(fs.Weight, wp, false)
	if ok && w.Cmp(*resource.NewQuantity(maxFairWeight, resource.DecimalSI)) > 0 {
		errs = append(errs, invalidf(wp, Shorten(rawText(fs.Weight)), "must not be more than %d", maxFairWeight))
	}
	return errs
}

// quotaOwner is what holds a quota: the rules for its limits differ
// between a ClusterQueue and a Cohort.
type quotaOwner struct {
	// linked: the ClusterQueue has a cohort, or the Cohort a parent, so
	// that borrowingLimit and lendingLimit mean something.
	linked bool
	// unlinked says why they do not: "the ClusterQueue has no cohort".
	unlinked string
	// lendsSubtree: a Cohort lends its subtree's quota, so its
	// lendingLimit may be more than its own nominal quota.
	lendsSubtree bool
}

// validateResourceGroups checks the groups of a ClusterQueue or Cohort:
// each resource is covered by one group, each flavor is listed once and
// defined, and each flavor gives a quota for every resource of its group.
func validateResourceGroups(groups []rawResourceGroup, p *field.Path, flavorNames sets.Set[string], owner quotaOwner) field.ErrorList {
	if len(groups) > maxResourceGroups {
		return field.ErrorList{withDetail(field.TooMany(p, len(groups), maxResourceGroups),
			"has %d groups, more than %d", len(groups), maxResourceGroups)}
	}
	var errs field.ErrorList
	coveredBy := map[corev1.ResourceName]int{}
	listedAt := map[string]string{}
	for gi := range groups {
		g, gp := &groups[gi], p.Index(gi)
		if tooMany := validateGroupSize(g, gp); len(tooMany) > 0 {
			errs = append(errs, tooMany...)
			continue
		}
		errs = append(errs, validateCovered(g, gi, gp, coveredBy)...)
		if len(g.Flavors) == 0 {
			errs = append(errs, field.Required(gp.Child("flavors"), "must list at least one flavor"))
		}
		covered := coveredResources(g)
		for fi := range g.Flavors {
			fp := gp.Child("flavors").Index(fi)
			errs = append(errs, validateFlavorRef(g.Flavors[fi].Name, fp, flavorNames, listedAt, fmt.Sprintf("resourceGroups[%d].flavors[%d]", gi, fi))...)
			errs = append(errs, validateFlavorResources(&g.Flavors[fi], fp, covered, len(g.CoveredResources) > 0, owner)...)
		}
	}
	return errs
}

// validateGroupSize checks a group against Kueue's list limits.
func validateGroupSize(g *rawResourceGroup, gp *field.Path) field.ErrorList {
	tooMany := func(p *field.Path, n, limit int, what string) field.ErrorList {
		return field.ErrorList{withDetail(field.TooMany(p, n, limit), "has %d %s, more than %d", n, what, limit)}
	}
	if len(g.Flavors) > maxGroupFlavors {
		return tooMany(gp.Child("flavors"), len(g.Flavors), maxGroupFlavors, "flavors")
	}
	for fi := range g.Flavors {
		if n := len(g.Flavors[fi].Resources); n > maxResources {
			return tooMany(gp.Child("flavors").Index(fi).Child("resources"), n, maxResources, "resources")
		}
	}
	if n := len(coveredResources(g)); n > maxResources {
		return tooMany(gp.Child("coveredResources"), n, maxResources, "resources")
	}
	return nil
}

// validateCovered checks a group's coveredResources or, when it is left
// out, the resources its flavors list.
func validateCovered(g *rawResourceGroup, gi int, gp *field.Path, coveredBy map[corev1.ResourceName]int) field.ErrorList {
	if len(g.CoveredResources) == 0 {
		if len(coveredResources(g)) == 0 && len(g.Flavors) > 0 {
			return field.ErrorList{field.Required(gp.Child("coveredResources"), "must list at least one resource")}
		}
		return validateDerivedCovered(g, gi, gp, coveredBy)
	}
	var errs field.ErrorList
	listed := sets.New[corev1.ResourceName]()
	for j, r := range g.CoveredResources {
		rp := gp.Child("coveredResources").Index(j)
		switch {
		case listed.Has(r):
			errs = append(errs, withDetail(field.Duplicate(rp, string(r)), "resource %q is listed twice", r))
		case r == "":
			errs = append(errs, required(rp))
		default:
			errs = append(errs, validateResourceName(rp, r)...)
			errs = append(errs, coverOnce(r, gi, rp, coveredBy)...)
		}
		listed.Insert(r)
	}
	return errs
}

// validateDerivedCovered checks the resources a group without
// coveredResources covers, each where a flavor first lists it.
func validateDerivedCovered(g *rawResourceGroup, gi int, gp *field.Path, coveredBy map[corev1.ResourceName]int) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[corev1.ResourceName]()
	for fi, f := range g.Flavors {
		for ri, r := range f.Resources {
			if r.Name == "" || seen.Has(r.Name) {
				continue
			}
			seen.Insert(r.Name)
			rp := gp.Child("flavors").Index(fi).Child("resources").Index(ri).Child("name")
			errs = append(errs, coverOnce(r.Name, gi, rp, coveredBy)...)
		}
	}
	return errs
}

// coverOnce records that group gi covers r, and reports an earlier group
// that covers it too.
func coverOnce(r corev1.ResourceName, gi int, p *field.Path, coveredBy map[corev1.ResourceName]int) field.ErrorList {
	if first, ok := coveredBy[r]; ok && first != gi {
		return field.ErrorList{invalidf(p, string(r), "resource %q is already covered by resourceGroups[%d]", r, first)}
	}
	coveredBy[r] = gi
	return nil
}

// validateFlavorRef checks a flavor named by a ClusterQueue: defined, and
// listed once across all its groups.
func validateFlavorRef(name string, fp *field.Path, flavorNames sets.Set[string], listedAt map[string]string, here string) field.ErrorList {
	np := fp.Child("name")
	if errs := validateDNSName(np, name, "flavor name", true); len(errs) > 0 {
		return errs
	}
	if first, dup := listedAt[name]; dup {
		return field.ErrorList{withDetail(field.Duplicate(np, name), "flavor %q is already listed in %s", name, first)}
	}
	listedAt[name] = here
	if !flavorNames.Has(name) {
		return field.ErrorList{withDetail(field.NotFound(np, name), "flavor %q is not defined", name)}
	}
	return nil
}

// validateFlavorResources checks that a flavor lists each resource of its
// group once, and nothing else, with valid quotas. explicit says the group
// has coveredResources rather than covering what its flavors list.
func validateFlavorResources(f *rawFlavorQuotas, fp *field.Path, covered []corev1.ResourceName, explicit bool, owner quotaOwner) field.ErrorList {
	var errs field.ErrorList
	coveredSet := sets.New(covered...)
	rsp := fp.Child("resources")
	listed := sets.New[corev1.ResourceName]()
	for ri := range f.Resources {
		r, rp := &f.Resources[ri], rsp.Index(ri)
		switch {
		case r.Name == "":
			errs = append(errs, required(rp.Child("name")))
		case listed.Has(r.Name):
			errs = append(errs, withDetail(field.Duplicate(rp.Child("name"), string(r.Name)), "resource %q is listed twice", r.Name))
		case explicit && !coveredSet.Has(r.Name):
			errs = append(errs, invalidf(rp.Child("name"), string(r.Name), "resource %q is not in coveredResources (%s)", r.Name, joinNames(covered)))
		case !explicit:
			errs = append(errs, validateResourceName(rp.Child("name"), r.Name)...)
		}
		listed.Insert(r.Name)
		errs = append(errs, validateQuota(r, rp, owner)...)
	}
	var missing []string
	for _, c := range covered {
		if c != "" && !listed.Has(c) {
			missing = append(missing, strconv.Quote(string(c)))
		}
	}
	if len(missing) > 0 {
		noun := "resource"
		if len(missing) > 1 {
			noun = "resources"
		}
		errs = append(errs, field.Required(rsp, fmt.Sprintf(
			"missing %s %s: each flavor of a resource group must list all its resources (%s)", noun, strings.Join(missing, ", "), joinNames(covered))))
	}
	return errs
}

func joinNames(names []corev1.ResourceName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// validateQuota checks the quantities of one resource quota. The limits
// need a cohort (a parent, for a Cohort), and a ClusterQueue lends no more
// than its nominal quota.
func validateQuota(r *rawResourceQuota, rp *field.Path, owner quotaOwner) field.ErrorList {
	nominal, nominalOK, errs := checkQuantity(r.NominalQuota, rp.Child("nominalQuota"), true)
	if !isUnset(r.BorrowingLimit) {
		_, _, bErrs := checkQuantity(r.BorrowingLimit, rp.Child("borrowingLimit"), false)
		errs = append(errs, bErrs...)
		if !owner.linked {
			errs = append(errs, field.Forbidden(rp.Child("borrowingLimit"), "must not be set when "+owner.unlinked))
		}
	}
	if !isUnset(r.LendingLimit) {
		lending, lendingOK, lErrs := checkQuantity(r.LendingLimit, rp.Child("lendingLimit"), false)
		errs = append(errs, lErrs...)
		if !owner.linked {
			errs = append(errs, field.Forbidden(rp.Child("lendingLimit"), "must not be set when "+owner.unlinked))
		}
		if lendingOK && nominalOK && !owner.lendsSubtree && lending.Cmp(nominal) > 0 {
			errs = append(errs, invalidf(rp.Child("lendingLimit"), rawText(r.LendingLimit),
				"must not be more than nominalQuota (%s)", rawText(r.NominalQuota)))
		}
	}
	return errs
}

// checkQuantity parses a quantity that must not be negative. ok says it
// is set and valid.
func checkQuantity(raw []byte, p *field.Path, isRequired bool) (q resource.Quantity, ok bool, errs field.ErrorList) {
	if isUnset(raw) {
		if isRequired {
			return q, false, field.ErrorList{required(p)}
		}
		return q, false, nil
	}
	text := Shorten(rawText(raw))
	q, err := parseQuantity(raw)
	switch {
	case errors.Is(err, errQuantityRange):
		return q, false, field.ErrorList{invalidf(p, text, "%q is out of range: at most %d characters, with a decimal exponent within ±%d", text, maxQuantityLen, maxQuantityExponent)}
	case err != nil:
		return q, false, field.ErrorList{invalidf(p, text, "%q is not a valid quantity such as 10, 500m or 100Gi", text)}
	}
	if q.Sign() < 0 {
		return q, false, field.ErrorList{invalidf(p, text, "must not be negative, got %s", text)}
	}
	return q, true, nil
}

func validateInt32(p *field.Path, raw []byte) field.ErrorList {
	if _, err := parseInt32(raw); err != nil {
		text := Shorten(rawText(raw))
		return field.ErrorList{invalidf(p, text, "must be an integer from -2147483648 to 2147483647, got %s", text)}
	}
	return nil
}

// LocalQueue and WorkloadPriorityClass.

func validateLocalQueue(lq *rawLocalQueue, root *field.Path, queueNames sets.Set[string]) field.ErrorList {
	errs := validateObjectMeta(&lq.Metadata, root, true)
	p := root.Child("spec", "clusterQueue")
	switch cq := lq.Spec.ClusterQueue; {
	case cq == "":
		errs = append(errs, required(p))
	case !queueNames.Has(cq):
		errs = append(errs, withDetail(field.NotFound(p, cq), "ClusterQueue %q is not defined", cq))
	}
	return append(errs, validateEnum(root.Child("spec", "stopPolicy"), lq.Spec.StopPolicy, defaultStopPolicy, "Hold", "HoldAndDrain")...)
}

func validatePriorityClass(pc *rawPriorityClass, root *field.Path) field.ErrorList {
	errs := validateObjectMeta(&pc.Metadata, root, false)
	if isUnset(pc.Value) {
		return append(errs, required(root.Child("value")))
	}
	return append(errs, validateInt32(root.Child("value"), pc.Value)...)
}
