package kinds

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"tally.dev/tally/queues"
)

// Source reads a config: Text or Files.
type Source func() (*queues.Config, []string, field.ErrorList)

// Text is the config documents of one text: the ConfigMap's key
// queues.yaml (queues.Parse).
func Text(data string) Source {
	return func() (*queues.Config, []string, field.ErrorList) { return queues.Parse([]byte(data)) }
}

// Files is config files read as one config, in order (queues.ParseFiles).
func Files(paths ...string) Source {
	return func() (*queues.Config, []string, field.ErrorList) { return queues.ParseFiles(paths...) }
}

// API is what Accept may ask the API server. Its zero value is offline.
type API struct {
	// Mapper gives each declared kind the resource name the API server
	// serves it under. Nil: its kind in lower case with an s, and every
	// kind counts as served.
	Mapper meta.RESTMapper
	// CRDs lists the cluster's CustomResourceDefinitions, to check each
	// declared kind's paths against its CRD's schema (CheckSchema). It is
	// called only when the config declares kinds. Nil: the paths are
	// checked for their syntax only; an error says so in a warning.
	CRDs func(context.Context) ([]apiextensionsv1.CustomResourceDefinition, error)
}

// Accepted is what Accept makes of a config.
type Accepted struct {
	// Config is the config; nil when Errs holds anything.
	Config *queues.Config
	// Kinds are the kinds its WorkloadKinds declare that the API server
	// serves, each with its resource name, ready for Declare.
	Kinds []*Declared
	// Unserved are the declared kinds API.Mapper does not know, left out
	// of Kinds: the config still stands, and a later load may find them.
	Unserved []Unserved
	Warnings []string
	// Errs is every reason to refuse the config, each with its field path.
	Errs field.ErrorList
}

// Unserved is a declared kind the API server does not serve, and why.
type Unserved struct {
	Spec queues.WorkloadKind
	Err  error
}

// Accept is tally's one acceptance of a config, for the ConfigMap's
// webhook, the ledger's config loader, serve's --config, check-config,
// status and explain: it parses and validates src, refuses a WorkloadKind
// that names a built-in kind, checks the declared paths against their
// CRDs' schemas when api can list them, and resolves the declared kinds'
// resource names with api's mapper. Each caller decides what to do with
// the result: deny, keep the last good config, exit.
func Accept(ctx context.Context, src Source, api API) Accepted {
	cfg, warnings, errs := src()
	acc := Accepted{Warnings: warnings, Errs: errs}
	if cfg == nil || len(errs) > 0 {
		return acc
	}
	acc.Errs = CheckDeclared(cfg.WorkloadKinds)
	if api.CRDs != nil && len(cfg.WorkloadKinds) > 0 {
		more, notes := checkCRDs(ctx, cfg.WorkloadKinds, api.CRDs)
		acc.Errs, acc.Warnings = append(acc.Errs, more...), append(acc.Warnings, notes...)
	}
	if len(acc.Errs) > 0 {
		return acc
	}
	acc.Config = cfg
	for _, spec := range cfg.WorkloadKinds {
		plural := strings.ToLower(spec.Kind) + "s"
		if api.Mapper != nil {
			m, err := api.Mapper.RESTMapping(schema.GroupKind{Group: spec.Group, Kind: spec.Kind}, spec.Version)
			if err != nil {
				acc.Unserved = append(acc.Unserved, Unserved{Spec: spec, Err: err})
				continue
			}
			plural = m.Resource.Resource
		}
		acc.Kinds = append(acc.Kinds, NewDeclared(spec, plural))
	}
	return acc
}

// checkCRDs checks the declared kinds' paths against the schemas of the
// CRDs list returns; notes say what could not be checked.
func checkCRDs(ctx context.Context, specs []queues.WorkloadKind, list func(context.Context) ([]apiextensionsv1.CustomResourceDefinition, error)) (field.ErrorList, []string) {
	crds, err := list(ctx)
	if err != nil {
		return nil, []string{fmt.Sprintf("WorkloadKind paths are checked for their syntax only, not against the CRDs: %v", err)}
	}
	var errs field.ErrorList
	var notes []string
	for _, spec := range specs {
		i := slices.IndexFunc(crds, func(crd apiextensionsv1.CustomResourceDefinition) bool {
			return crd.Spec.Group == spec.Group && crd.Spec.Names.Kind == spec.Kind
		})
		if i < 0 {
			notes = append(notes, fmt.Sprintf("WorkloadKind %q: no CRD of the API server serves %s %s; its paths are checked for their syntax only", spec.Name, spec.Group, spec.Kind))
			continue
		}
		crd := &crds[i]
		v := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == spec.Version })
		if v < 0 {
			errs = append(errs, field.NotFound(field.NewPath(fmt.Sprintf("WorkloadKind %q", spec.Name)).Child("spec", "version"), spec.Version))
			continue
		}
		if s := crd.Spec.Versions[v].Schema; s != nil && s.OpenAPIV3Schema != nil {
			errs = append(errs, CheckSchema(spec, s.OpenAPIV3Schema)...)
		}
	}
	return errs, notes
}
