package queues

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Cohort documents.
//
// A Cohort's name, as a ClusterQueue's cohortName or another Cohort's
// parentName, needs no document: as in Kueue, a cohort without one has no
// quota of its own and no parent. Cohort and ClusterQueue names are apart:
// a cohort may share a ClusterQueue's name.

// validateCohortDocument checks one Cohort. As Kueue's webhook does, it
// allows borrowingLimit and lendingLimit only below a parent, and a
// lendingLimit above the Cohort's own nominal quota, since a Cohort lends
// its subtree's quota.
func validateCohortDocument(co *rawCohort, root *field.Path, flavorNames sets.Set[string]) field.ErrorList {
	spec := root.Child("spec")
	errs := validateObjectMeta(&co.Metadata, root, false)
	errs = append(errs, validateDNSName(spec.Child("parentName"), co.Spec.ParentName, "cohort name", false)...)
	errs = append(errs, validateFairSharing(co.Spec.FairSharing, spec.Child("fairSharing"))...)
	return append(errs, validateResourceGroups(co.Spec.ResourceGroups, spec.Child("resourceGroups"), flavorNames,
		quotaOwner{linked: co.Spec.ParentName != "", unlinked: "the Cohort has no parentName", lendsSubtree: true})...)
}

// validateCohortTree refuses a loop of parentNames, reported once, at the
// first of its Cohorts in the config.
func validateCohortTree(docs []*document) field.ErrorList {
	parent, root := map[string]string{}, map[string]*field.Path{}
	for _, d := range docs {
		if d.co == nil || d.broken || d.key == "" {
			continue
		}
		if _, dup := root[d.key]; dup {
			continue
		}
		root[d.key] = d.root
		if d.co.Spec.ParentName != "" {
			parent[d.key] = d.co.Spec.ParentName
		}
	}
	var errs field.ErrorList
	reported := sets.New[string]()
	for _, d := range docs {
		if d.co == nil || root[d.key] != d.root || reported.Has(d.key) {
			continue
		}
		path := []string{d.key}
		for at, ok := parent[d.key]; ok; at, ok = parent[at] {
			path = append(path, at)
			if at == d.key {
				reported.Insert(path...)
				errs = append(errs, invalidf(d.root.Child("spec", "parentName"), d.co.Spec.ParentName, "cycle %s", strings.Join(path, " -> ")))
				break
			}
			if reported.Has(at) || len(path) > len(parent)+1 {
				break
			}
		}
	}
	return errs
}
