package queues

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const kindWorkloadKind = "WorkloadKind"

// WorkloadKind declares a kind of workload tally queues without Go code
// of its own: any CRD whose objects have a suspend field (see the kinds
// package, which turns it into a kind on the same seam as the built-in
// ones).
type WorkloadKind struct {
	// Name is the document's metadata.name.
	Name                 string
	Group, Version, Kind string
	// SuspendPath is the path of the suspend field, as segments: a
	// segment that is a number indexes a list.
	SuspendPath []string
	PodSets     []WorkloadKindPodSet
	// FinishedConditions are the condition types (status.conditions)
	// that mean finished when true.
	FinishedConditions []string
}

// WorkloadKindPodSet is one pod set of a declared kind: the path of its
// pod template and of its pod count (nil: 1 pod).
type WorkloadKindPodSet struct {
	Name                    string
	TemplatePath, CountPath []string
}

// rawWorkloadKind is a WorkloadKind document.
type rawWorkloadKind struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Group       string `json:"group"`
		Version     string `json:"version"`
		Kind        string `json:"kind"`
		SuspendPath string `json:"suspendPath"`
		PodSets     []struct {
			Name         string `json:"name"`
			TemplatePath string `json:"templatePath"`
			CountPath    string `json:"countPath"`
		} `json:"podSets"`
		FinishedConditions []string `json:"finishedConditions"`
	} `json:"spec"`
}

// ParsePath reads a field path as a WorkloadKind writes it:
// .spec.replicaSpecs.worker.template, or .spec.roles[0].template to
// index a list. It returns the segments.
func ParsePath(s string) ([]string, error) {
	if !strings.HasPrefix(s, ".") {
		return nil, fmt.Errorf("must start with a dot, as in .spec.suspend")
	}
	var out []string
	for _, part := range strings.Split(s[1:], ".") {
		name, rest, indexed := strings.Cut(part, "[")
		if name == "" {
			return nil, fmt.Errorf("has an empty field name")
		}
		out = append(out, name)
		for indexed {
			idx, after, closed := strings.Cut(rest, "]")
			if !closed {
				return nil, fmt.Errorf("has an index %q without its ]", "["+rest)
			}
			if idx == "" || strings.Trim(idx, "0123456789") != "" {
				return nil, fmt.Errorf("has an index %q that is not a number", idx)
			}
			rest = after
			out = append(out, idx)
			if rest == "" {
				break
			}
			if !strings.HasPrefix(rest, "[") {
				return nil, fmt.Errorf("has %q after an index", rest)
			}
			rest, indexed = rest[1:], true
		}
	}
	return out, nil
}

// validateWorkloadKind checks a WorkloadKind document.
func validateWorkloadKind(k *rawWorkloadKind, root *field.Path) field.ErrorList {
	errs := validateObjectMeta(&k.Metadata, root, false)
	if k.APIVersion != "tally.dev/v1" {
		errs = append(errs, withDetail(field.NotSupported(root.Child("apiVersion"), k.APIVersion, []string{"tally.dev/v1"}),
			"kind WorkloadKind is tally's own: its apiVersion is tally.dev/v1"))
	}
	spec := root.Child("spec")
	if k.Spec.Group == "" {
		errs = append(errs, required(spec.Child("group")))
	} else if msgs := validation.IsDNS1123Subdomain(k.Spec.Group); len(msgs) > 0 {
		errs = append(errs, invalidf(spec.Child("group"), k.Spec.Group, "%s", strings.Join(msgs, "; ")))
	}
	if k.Spec.Version == "" {
		errs = append(errs, required(spec.Child("version")))
	} else if msgs := validation.IsDNS1035Label(k.Spec.Version); len(msgs) > 0 {
		errs = append(errs, invalidf(spec.Child("version"), k.Spec.Version, "%s", strings.Join(msgs, "; ")))
	}
	if k.Spec.Kind == "" {
		errs = append(errs, required(spec.Child("kind")))
	}
	errs = append(errs, validatePath(spec.Child("suspendPath"), k.Spec.SuspendPath, true)...)
	if len(k.Spec.PodSets) == 0 {
		errs = append(errs, field.Required(spec.Child("podSets"), "lists at least one pod set"))
	}
	names := map[string]bool{}
	for i, ps := range k.Spec.PodSets {
		p := spec.Child("podSets").Index(i)
		errs = append(errs, validateDNSName(p.Child("name"), ps.Name, "pod set name", true)...)
		if names[ps.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), ps.Name))
		}
		names[ps.Name] = true
		errs = append(errs, validatePath(p.Child("templatePath"), ps.TemplatePath, true)...)
		errs = append(errs, validatePath(p.Child("countPath"), ps.CountPath, false)...)
	}
	if len(k.Spec.FinishedConditions) == 0 {
		errs = append(errs, field.Required(spec.Child("finishedConditions"), "lists the condition types that mean finished, such as Succeeded and Failed"))
	}
	for i, c := range k.Spec.FinishedConditions {
		if c == "" {
			errs = append(errs, required(spec.Child("finishedConditions").Index(i)))
		}
	}
	return errs
}

func validatePath(p *field.Path, s string, isRequired bool) field.ErrorList {
	if s == "" {
		if isRequired {
			return field.ErrorList{required(p)}
		}
		return nil
	}
	if _, err := ParsePath(s); err != nil {
		return field.ErrorList{invalidf(p, s, "%q %v", s, err)}
	}
	return nil
}

// toWorkloadKind builds a validated document's WorkloadKind.
func toWorkloadKind(k *rawWorkloadKind) WorkloadKind {
	out := WorkloadKind{Name: k.Metadata.Name, Group: k.Spec.Group, Version: k.Spec.Version, Kind: k.Spec.Kind,
		FinishedConditions: k.Spec.FinishedConditions}
	out.SuspendPath, _ = ParsePath(k.Spec.SuspendPath)
	for _, ps := range k.Spec.PodSets {
		s := WorkloadKindPodSet{Name: ps.Name}
		s.TemplatePath, _ = ParsePath(ps.TemplatePath)
		if ps.CountPath != "" {
			s.CountPath, _ = ParsePath(ps.CountPath)
		}
		out.PodSets = append(out.PodSets, s)
	}
	return out
}
