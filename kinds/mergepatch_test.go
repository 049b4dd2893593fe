package kinds

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// TestMergePatchMarshal: MergePatch.Marshal writes what json.Marshal
// writes, byte for byte, for the values a patch holds (objects, lists,
// strings, booleans, nulls, typed API values) and for random ones, with
// strings that json.Marshal escapes; a value json.Marshal refuses is
// refused.
func TestMergePatchMarshal(t *testing.T) {
	check := func(p MergePatch) {
		t.Helper()
		want, werr := json.Marshal(p)
		got, gerr := p.Marshal()
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Fatalf("Marshal(%#v) = %s, %v; json.Marshal: %s, %v", p, got, gerr, want, werr)
		}
	}
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "tally.dev/flavor", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}}
	check(MergePatch{})
	check(MergePatch{"metadata": map[string]any{"resourceVersion": "12", "labels": map[string]any{"tally.dev/state": "admitted", "gone": nil}},
		"spec": map[string]any{"suspend": false, "template": MergePatch{"spec": map[string]any{"affinity": map[string]any{
			"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": sel}}}}}})
	check(MergePatch{"list": []any{"a", 1, nil, true, map[string]any{}, []any{}, []any(nil)}, "nil map": map[string]any(nil),
		"q": resource.MustParse("1500m"), "typed": []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}, "n": 3.5})
	check(MergePatch{"<&>": "a\"b\\c\n\u2028é\xff", "": ""})
	if _, err := (MergePatch{"bad": map[string]any{"ch": make(chan int)}}).Marshal(); err == nil {
		t.Error("a channel encoded")
	}
	r := rand.New(rand.NewPCG(1, 2))
	chars := []rune("ab/.~-_ \"\\<>&\n\té\u2028")
	str := func() string {
		s := make([]rune, r.IntN(6))
		for i := range s {
			s[i] = chars[r.IntN(len(chars))]
		}
		return string(s)
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := r.IntN(7); {
		case n == 0:
			return nil
		case n == 1:
			return r.IntN(2) == 0
		case n == 2 || depth > 3:
			return str()
		case n == 3:
			l := make([]any, r.IntN(4))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		case n == 4:
			return []string{str(), str()}
		default:
			m := map[string]any{}
			for range r.IntN(4) {
				m[str()] = value(depth + 1)
			}
			return m
		}
	}
	for range 2000 {
		p := MergePatch{}
		for range r.IntN(4) {
			p[str()] = value(0)
		}
		check(p)
	}
}

// BenchmarkAdmitPatch is the admission write of a Job in one flavor.
func BenchmarkAdmitPatch(b *testing.B) {
	w := &queues.Workload{UID: "0b7c6a4e-1f2d-4c3b-9a8e-7d6c5b4a3f21", Queue: "cq-1", PodSets: []queues.PodSet{{Name: "main", Count: 1}}}
	tgt := Target{Kind: Job{}, W: w, RV: "123456", Paths: [][]string{{"spec", "template"}}, Suspend: []string{"spec", "suspend"}}
	combo := []*flavors.Flavor{{Name: "default", NodeLabels: map[string]string{"tally.dev/flavor": "default"},
		Tolerations: []corev1.Toleration{{Key: "x", Operator: corev1.TolerationOpExists}}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tgt.Admit([][]*flavors.Flavor{combo}, map[string]any{queues.AnnotationFlavors: "main=default", queues.AnnotationAdmittedAt: "2026-11-29T00:00:00Z"}); err != nil {
			b.Fatal(err)
		}
	}
}
