package queues

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"tally.dev/tally/flavors"
)

// Devices handed out by Dynamic Resource Allocation are charged as
// ordinary resources. The Configuration document's
// resources.deviceClassMappings (Kueue's field) maps DeviceClasses to a
// resource name; a pod's claims (spec.resourceClaims) that name a
// ResourceClaimTemplate are read from the template, and each device
// request of a mapped class is charged its count of the mapped resource
// on every pod. What cannot be charged so makes the workload
// inadmissible, with why (ClaimRequests): a claim named directly (it may
// be shared by the pods of any workload), a template that does not exist
// (yet), a class no mapping names, allocationMode All and adminAccess.

// rawResources is the resources section of a Configuration document, of
// which tally reads deviceClassMappings.
type rawResources struct {
	DeviceClassMappings []rawDeviceClassMapping `json:"deviceClassMappings"`
}

// rawDeviceClassMapping maps DeviceClasses to the resource their devices
// are charged as.
type rawDeviceClassMapping struct {
	Name             corev1.ResourceName `json:"name"`
	DeviceClassNames []string            `json:"deviceClassNames"`
}

// deviceMappingField says why a field of a deviceClassMappings entry
// that tally does not read is refused ("" for any other field of the
// Configuration). path is the field's dotted path.
func deviceMappingField(root *field.Path, path string) *field.Error {
	if !strings.HasPrefix(path, "resources.deviceClassMappings") {
		return nil
	}
	why := "unknown field: a mapping has name and deviceClassNames"
	if strings.HasSuffix(path, ".sources") || strings.Contains(path, ".sources[") || strings.Contains(path, ".sources.") {
		why = "tally does not charge device counters or capacities (partitionable devices, such as MIG slices, that consume counters their ResourceSlices publish, and devices shared by capacity); map the classes of whole devices with deviceClassNames, or leave this mapping out"
	}
	return &field.Error{Type: field.ErrorTypeForbidden, Field: root.String() + "." + path, BadValue: "", Detail: why}
}

// validateDeviceClassMappings checks resources.deviceClassMappings: each
// mapping names a valid resource and at least one DeviceClass, and a
// class is in one mapping at most.
func validateDeviceClassMappings(r *rawResources, root *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	p := root.Child("resources", "deviceClassMappings")
	seen := map[string]*field.Path{}
	for i, m := range r.DeviceClassMappings {
		mp := p.Index(i)
		if m.Name == "" {
			errs = append(errs, required(mp.Child("name")))
		} else {
			errs = append(errs, validateResourceName(mp.Child("name"), m.Name)...)
		}
		if len(m.DeviceClassNames) == 0 {
			errs = append(errs, field.Required(mp.Child("deviceClassNames"), "must name at least one DeviceClass"))
		}
		for j, class := range m.DeviceClassNames {
			cp := mp.Child("deviceClassNames").Index(j)
			errs = append(errs, validateDNSName(cp, class, "DeviceClass name", true)...)
			if first, dup := seen[class]; dup {
				errs = append(errs, withDetail(field.Duplicate(cp, class),
					"DeviceClass %q is mapped twice: in %s and here; a class's devices are charged as one resource", class, first))
				continue
			}
			seen[class] = cp
		}
	}
	return errs
}

// deviceClassesOf returns the resource each mapped DeviceClass is
// charged as; nil when there are none.
func deviceClassesOf(r *rawResources) map[string]corev1.ResourceName {
	if r == nil || len(r.DeviceClassMappings) == 0 {
		return nil
	}
	out := map[string]corev1.ResourceName{}
	for _, m := range r.DeviceClassMappings {
		for _, class := range m.DeviceClassNames {
			out[class] = intern(m.Name)
		}
	}
	return out
}

// StripClaimTemplate keeps of a ResourceClaimTemplate what ClaimRequests
// reads: its identity and its device requests.
func StripClaimTemplate(t *resourcev1.ResourceClaimTemplate) *resourcev1.ResourceClaimTemplate {
	out := &resourcev1.ResourceClaimTemplate{}
	out.Name, out.Namespace, out.UID, out.ResourceVersion = t.Name, t.Namespace, t.UID, t.ResourceVersion
	reqs := make([]resourcev1.DeviceRequest, len(t.Spec.Spec.Devices.Requests))
	for i, r := range t.Spec.Spec.Devices.Requests {
		reqs[i] = resourcev1.DeviceRequest{Name: r.Name}
		if e := r.Exactly; e != nil {
			reqs[i].Exactly = &resourcev1.ExactDeviceRequest{DeviceClassName: e.DeviceClassName, AllocationMode: e.AllocationMode, Count: e.Count, AdminAccess: e.AdminAccess}
		}
		for _, s := range r.FirstAvailable {
			reqs[i].FirstAvailable = append(reqs[i].FirstAvailable, resourcev1.DeviceSubRequest{Name: s.Name, DeviceClassName: s.DeviceClassName,
				AllocationMode: s.AllocationMode, Count: s.Count})
		}
	}
	out.Spec.Spec.Devices.Requests = reqs
	return out
}

// ClaimTemplateNames returns the ResourceClaimTemplates that the pods of
// spec name.
func ClaimTemplateNames(spec *corev1.PodSpec) []string {
	var out []string
	for _, c := range spec.ResourceClaims {
		if c.ResourceClaimTemplateName != nil {
			out = append(out, *c.ResourceClaimTemplateName)
		}
	}
	return out
}

// ClaimRequests returns what one pod of spec is charged for the devices
// of its resource claims, by resource name, and why, when it cannot be
// charged for them, with the field path that says so: then the pod may
// get devices tally cannot count, and its workload is not admitted. d's
// ClaimTemplates are its namespace's templates and d's Config maps the
// DeviceClasses; d may be nil when spec has no claims.
//
// A request of prioritized alternatives (firstAvailable) is charged, in
// each resource, the most that any alternative asks: the scheduler picks
// one of them when it allocates, after tally admits the workload, so the
// workload holds what the largest would take.
func (d *PodDefaults) ClaimRequests(spec *corev1.PodSpec) (flavors.Resources, string) {
	if len(spec.ResourceClaims) == 0 {
		return nil, ""
	}
	var out flavors.Resources
	for i, c := range spec.ResourceClaims {
		p := field.NewPath("spec", "resourceClaims").Index(i)
		switch {
		case c.ResourceClaimName != nil:
			return nil, fmt.Sprintf("%s: the pods name ResourceClaim %q directly, which the pods of other workloads may share, and tally charges devices only per pod: name a ResourceClaimTemplate in resourceClaimTemplateName instead",
				p.Child("resourceClaimName"), Shorten(*c.ResourceClaimName))
		case c.ResourceClaimTemplateName == nil:
			continue
		}
		name := *c.ResourceClaimTemplateName
		var t *resourcev1.ResourceClaimTemplate
		if d != nil {
			t = d.ClaimTemplates[name]
		}
		if t == nil {
			return nil, fmt.Sprintf("%s: ResourceClaimTemplate %q not found; the workload waits until it exists", p.Child("resourceClaimTemplateName"), Shorten(name))
		}
		var classes map[string]corev1.ResourceName
		if d.Config != nil {
			classes = d.Config.DeviceClasses
		}
		charge, why := templateRequests(t, classes)
		if why != "" {
			return nil, fmt.Sprintf("%s: ResourceClaimTemplate %q: %s", p.Child("resourceClaimTemplateName"), Shorten(name), why)
		}
		for r, a := range charge {
			if out == nil {
				out = flavors.Resources{}
			}
			out[r] = out[r].Add(a)
		}
	}
	return out, ""
}

// templateRequests is what one claim made from t is charged, given the
// resource each mapped DeviceClass is charged as, or why it cannot be.
func templateRequests(t *resourcev1.ResourceClaimTemplate, classes map[string]corev1.ResourceName) (flavors.Resources, string) {
	out := flavors.Resources{}
	rp := field.NewPath("spec", "spec", "devices", "requests")
	for i, r := range t.Spec.Spec.Devices.Requests {
		p := rp.Index(i)
		if e := r.Exactly; e != nil {
			res, amount, why := deviceRequest(p.Child("exactly"), e.DeviceClassName, e.AllocationMode, e.Count, e.AdminAccess != nil && *e.AdminAccess, classes)
			if why != "" {
				return nil, why
			}
			out[res] = out[res].Add(amount)
			continue
		}
		most := flavors.Resources{}
		for j, s := range r.FirstAvailable {
			res, amount, why := deviceRequest(p.Child("firstAvailable").Index(j), s.DeviceClassName, s.AllocationMode, s.Count, false, classes)
			if why != "" {
				return nil, why
			}
			most[res] = flavors.Max(most[res], amount)
		}
		for res, a := range most {
			out[res] = out[res].Add(a)
		}
	}
	return out, ""
}

// deviceRequest is what one device request (at path p) is charged, or
// why it cannot be.
func deviceRequest(p *field.Path, class string, mode resourcev1.DeviceAllocationMode, count int64, admin bool, classes map[string]corev1.ResourceName) (corev1.ResourceName, flavors.Amount, string) {
	res, ok := classes[class]
	switch {
	case !ok:
		return "", 0, fmt.Sprintf("%s: DeviceClass %q is not mapped to a resource, so tally cannot charge its devices: add it to the deviceClassNames of a mapping in the Configuration document's resources.deviceClassMappings",
			p.Child("deviceClassName"), Shorten(class))
	case mode == resourcev1.DeviceAllocationModeAll:
		return "", 0, fmt.Sprintf("%s: All asks for every matching device, however many there are, which tally cannot charge; ask for a count (ExactCount)",
			p.Child("allocationMode"))
	case admin:
		return "", 0, fmt.Sprintf("%s: a request with admin access gets devices that are in use by others, outside any quota; tally admits no such workload",
			p.Child("adminAccess"))
	}
	return res, flavors.FromQuantity(res, *resource.NewQuantity(max(count, 1), resource.DecimalSI)), ""
}

// ClaimTemplateUIDs returns the UIDs of the ResourceClaimTemplates of d
// that specs name, by name, for the AnnotationClaimTemplates record
// (FormatClaimTemplates); nil when they name none that d holds.
func (d *PodDefaults) ClaimTemplateUIDs(specs ...*corev1.PodSpec) map[string]types.UID {
	var out map[string]types.UID
	for _, spec := range specs {
		for _, name := range ClaimTemplateNames(spec) {
			if d == nil || d.ClaimTemplates[name] == nil {
				continue
			}
			if out == nil {
				out = map[string]types.UID{}
			}
			out[name] = d.ClaimTemplates[name].UID
		}
	}
	return out
}

// FormatClaimTemplates writes an AnnotationClaimTemplates value,
// "name=uid,...", in name order.
func FormatClaimTemplates(uids map[string]types.UID) string {
	if len(uids) == 0 {
		return ""
	}
	parts := make([]string, 0, len(uids))
	for _, name := range slices.Sorted(maps.Keys(uids)) {
		parts = append(parts, name+"="+string(uids[name]))
	}
	return strings.Join(parts, ",")
}

// ParseClaimTemplates reads an AnnotationClaimTemplates value; a part
// that is not name=uid is left out.
func ParseClaimTemplates(s string) map[string]types.UID {
	if s == "" {
		return nil
	}
	out := map[string]types.UID{}
	for part := range strings.SplitSeq(s, ",") {
		if name, uid, ok := strings.Cut(part, "="); ok && name != "" && uid != "" {
			out[name] = types.UID(uid)
		}
	}
	return out
}
