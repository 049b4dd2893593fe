package kinds

import (
	"fmt"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"tally.dev/tally/queues"
)

// CheckSchema checks a declared kind's paths against the OpenAPI schema
// of its CRD's version: each must lead, through its properties and list
// items, to a field of the right type (a boolean suspend field, an object
// pod template, an integer count). A field under
// x-kubernetes-preserve-unknown-fields cannot be checked and passes.
func CheckSchema(spec queues.WorkloadKind, schema *apiextensionsv1.JSONSchemaProps) field.ErrorList {
	root := field.NewPath(fmt.Sprintf("WorkloadKind %q", spec.Name)).Child("spec")
	errs := checkPath(root.Child("suspendPath"), spec.SuspendPath, schema, "boolean")
	for i, ps := range spec.PodSets {
		p := root.Child("podSets").Index(i)
		errs = append(errs, checkPath(p.Child("templatePath"), ps.TemplatePath, schema, "object")...)
		if ps.CountPath != nil {
			errs = append(errs, checkPath(p.Child("countPath"), ps.CountPath, schema, "integer")...)
		}
	}
	return errs
}

func checkPath(p *field.Path, path []string, s *apiextensionsv1.JSONSchemaProps, want string) field.ErrorList {
	for i, seg := range path {
		if s == nil || ptrTrue(s.XPreserveUnknownFields) {
			return nil
		}
		here := dotted(path[:i])
		switch s.Type {
		case "array":
			if _, err := strconv.Atoi(seg); err != nil {
				return field.ErrorList{field.Invalid(p, dotted(path), fmt.Sprintf("%q: %s is a list in the CRD's schema: index it, as in %s[0]", dotted(path), here, here))}
			}
			if s.Items == nil {
				return nil
			}
			s = s.Items.Schema
		default:
			next, ok := s.Properties[seg]
			switch {
			case ok:
				s = &next
			case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
				s = s.AdditionalProperties.Schema
			default:
				return field.ErrorList{field.Invalid(p, dotted(path), fmt.Sprintf("%q: the CRD's schema has no field %s in %s", dotted(path), seg, cmpDot(here)))}
			}
		}
	}
	if s != nil && s.Type != "" && s.Type != want && !ptrTrue(s.XPreserveUnknownFields) {
		return field.ErrorList{field.Invalid(p, dotted(path), fmt.Sprintf("%q is of type %s in the CRD's schema, not %s", dotted(path), s.Type, want))}
	}
	return nil
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// dotted writes a path as a WorkloadKind does: .spec.roles[0].template.
func dotted(path []string) string {
	var b strings.Builder
	for _, seg := range path {
		if _, err := strconv.Atoi(seg); err == nil {
			b.WriteString("[" + seg + "]")
		} else {
			b.WriteString("." + seg)
		}
	}
	if b.Len() == 0 {
		return "."
	}
	return b.String()
}

func cmpDot(s string) string {
	if s == "." {
		return "the object"
	}
	return s
}
