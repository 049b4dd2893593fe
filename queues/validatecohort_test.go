package queues_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// cohort is a Cohort document of apiVersion v1beta2; spec holds the lines
// under "spec:", indented by two spaces.
func cohort(name, spec string) string {
	doc := "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: " + name + "}\n"
	if spec != "" {
		doc += "spec:\n" + spec
	}
	return doc
}

func TestValidateCohorts(t *testing.T) {
	base := queuestest.Stream(queuestest.Flavor("default"))
	quota := func(fields string) string {
		return groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 4"+fields+"}]"))
	}
	cases := map[string]struct {
		in   string
		want []string
	}{
		"a tree with quota at every level": {
			in: queuestest.Stream(base, cohort("org", quota("")), cohort("ml", "  parentName: org\n"+quota(", borrowingLimit: 2, lendingLimit: 1")),
				queuestest.ClusterQueue("a", "  cohortName: ml\n"+queuestest.OneGroup)),
		},
		"a Cohort of v1beta1 and of tally.dev/v1": {
			in: queuestest.Stream(base, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: org}\n",
				"apiVersion: tally.dev/v1\nkind: Cohort\nmetadata: {name: ml}\nspec: {parentName: org}\n"),
		},
		"a parent with no Cohort document is a cohort with no quota": {
			in: queuestest.Stream(base, cohort("ml", "  parentName: org\n"), queuestest.ClusterQueue("a", "  cohort: ml\n"+queuestest.OneGroup)),
		},
		"a Cohort may share a ClusterQueue's name": {
			in: queuestest.Stream(base, cohort("a", ""), queuestest.ClusterQueue("a", "  cohortName: a\n"+queuestest.OneGroup)),
		},
		"a Cohort's lendingLimit may exceed its own nominal quota: it lends its subtree's": {
			in: queuestest.Stream(base, cohort("ml", "  parentName: org\n"+quota(", lendingLimit: 10"))),
		},
		"a root Cohort may not set borrowingLimit or lendingLimit": {
			in: queuestest.Stream(base, cohort("org", quota(", borrowingLimit: 1, lendingLimit: 1"))),
			want: []string{
				`Cohort "org".spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must not be set when the Cohort has no parentName`,
				`Cohort "org".spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must not be set when the Cohort has no parentName`,
			},
		},
		"a Cohort's flavor must be defined": {
			in:   queuestest.Stream(base, cohort("org", groups(group("[cpu]", "spot: "+cpu4)))),
			want: []string{`Cohort "org".spec.resourceGroups[0].flavors[0].name: flavor "spot" is not defined`},
		},
		"a Cohort's quotas are checked as a ClusterQueue's": {
			in: queuestest.Stream(base, cohort("org", groups(group("[cpu]", "default: [{name: cpu, nominalQuota: -1}, {name: memory, nominalQuota: 1}]")))),
			want: []string{
				`Cohort "org".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: must not be negative, got -1`,
				`Cohort "org".spec.resourceGroups[0].flavors[0].resources[1].name: resource "memory" is not in coveredResources (cpu)`,
			},
		},
		"a Cohort's name and parentName are cohort names": {
			in: queuestest.Stream(base, cohort("Org", "  parentName: Top\n")),
			want: []string{
				`Cohort "Org".metadata.name: "Org" is not a valid name: ` + subdomainRule,
				`Cohort "Org".spec.parentName: "Top" is not a valid cohort name: ` + subdomainRule,
			},
		},
		"a Cohort defined twice": {
			in:   queuestest.Stream(base, cohort("org", ""), cohort("org", "")),
			want: []string{`Cohort "org".metadata.name: Cohort "org" is defined twice: in document[1] and document[2]`},
		},
		"a Cohort that is its own parent": {
			in:   queuestest.Stream(base, cohort("a", "  parentName: a\n")),
			want: []string{`Cohort "a".spec.parentName: cycle a -> a`},
		},
		"a cycle is reported once, where it is first written": {
			in:   queuestest.Stream(base, cohort("x", "  parentName: a\n"), cohort("a", "  parentName: b\n"), cohort("b", "  parentName: c\n"), cohort("c", "  parentName: a\n")),
			want: []string{`Cohort "a".spec.parentName: cycle a -> b -> c -> a`},
		},
		"two cycles": {
			in: queuestest.Stream(base, cohort("a", "  parentName: b\n"), cohort("b", "  parentName: a\n"), cohort("c", "  parentName: d\n"), cohort("d", "  parentName: c\n")),
			want: []string{
				`Cohort "a".spec.parentName: cycle a -> b -> a`,
				`Cohort "c".spec.parentName: cycle c -> d -> c`,
			},
		},
		"a Cohort's fairSharing weight": {
			in: queuestest.Stream(base, cohort("ml", "  parentName: org\n  fairSharing: {weight: \"0.75\"}\n")),
		},
		"a Cohort's fairSharing weight is checked as a ClusterQueue's": {
			in: queuestest.Stream(base, cohort("ml", "  parentName: org\n  fairSharing: {weight: -1}\n"), cohort("hpc", "  fairSharing: {weight: 2M}\n")),
			want: []string{
				`Cohort "ml".spec.fairSharing.weight: must not be negative, got -1`,
				`Cohort "hpc".spec.fairSharing.weight: must not be more than 1000000`,
			},
		},
		"fair sharing in a cohort with a parent": {
			in: queuestest.Stream(base, cohort("ml", "  parentName: org\n"), queuestest.ClusterQueue("a", "  cohortName: ml\n  fairSharing: {weight: 1}\n"+queuestest.OneGroup)),
		},
		"fair sharing in a cohort with child cohorts": {
			in: queuestest.Stream(base, cohort("ml", "  parentName: org\n"), queuestest.ClusterQueue("a", "  cohortName: org\n  fairSharing: {}\n"+queuestest.OneGroup)),
		},
		"fair sharing in a cohort with quota of its own": {
			in: queuestest.Stream(base, cohort("ml", quota("")), queuestest.ClusterQueue("a", "  cohortName: ml\n  fairSharing: {}\n"+queuestest.OneGroup)),
		},
		"fair sharing in a flat cohort with a Cohort document": {
			in: queuestest.Stream(base, cohort("ml", ""), queuestest.ClusterQueue("a", "  cohortName: ml\n  fairSharing: {}\n"+queuestest.OneGroup)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, errs := queues.Parse([]byte(tc.in))
			if diff := cmp.Diff(tc.want, queues.FormatErrors(errs), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if (cfg == nil) != (len(tc.want) > 0) {
				t.Errorf("Config = %v with %d errors: want a Config exactly when there is no error", cfg, len(errs))
			}
		})
	}
}

// TestParseCohortTree checks what a parsed tree lends: Kueue's example of
// a cohort's own quota shared by its ClusterQueues, under a parent.
func TestParseCohortTree(t *testing.T) {
	in := queuestest.Stream(queuestest.Flavor("default"),
		cohort("org", groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 12}]"))),
		cohort("ml", "  parentName: org\n"+groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 2, borrowingLimit: 5}]"))),
		queuestest.ClusterQueue("a", "  cohortName: ml\n"+groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 0}]"))),
		queuestest.ClusterQueue("b", "  cohortName: hpc\n"+queuestest.OneGroup))
	cfg, _, errs := queues.Parse([]byte(in))
	if len(errs) > 0 {
		t.Fatal(queues.FormatErrors(errs))
	}
	fr := queues.FlavorResource{Flavor: "default", Resource: "cpu"}
	s := queues.NewSnapshot(cfg, nil, map[string]labels.Set{})
	got := map[string]string{}
	for _, q := range []string{"a", "b"} {
		total, _, _ := s.Ceiling(cfg.ClusterQueues[q], fr)
		got[q] = s.Available(cfg.ClusterQueues[q], fr).Format("cpu") + "/" + total.Format("cpu")
	}
	// a: ml's own 2 and, within ml's borrowingLimit, 5 of org's 12.
	// b: its own cohort, flat and apart.
	want := map[string]string{"a": "7/7", "b": "4/4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("available/ceiling (-want +got):\n%s", diff)
	}
	if got, want := []string{cfg.CohortRoot("ml"), cfg.CohortParent("ml"), cfg.CohortLabel("ml"), cfg.CohortRoot("hpc")}, []string{"org", "org", "ml (parent org)", "hpc"}; !cmp.Equal(got, want) {
		t.Errorf("root, parent, label = %q, want %q", got, want)
	}
	if names, depth := cfg.CohortOrder(); !cmp.Equal(names, []string{"hpc", "org", "ml"}) || !cmp.Equal(depth, []int{0, 0, 1}) {
		t.Errorf("CohortOrder = %q %v, want hpc, org, ml at depths 0, 0, 1", names, depth)
	}
	if got := cfg.Members(cfg.ClusterQueues["a"]); !cmp.Equal(got, []string{"a"}) {
		t.Errorf("Members(a) = %q", got)
	}
}
