package flavors

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFromQuantityExtremes(t *testing.T) {
	for _, tc := range []struct {
		q    string
		name corev1.ResourceName
		want Amount
	}{
		{"-1", corev1.ResourceCPU, 0},
		{"-9223372036854776", corev1.ResourceCPU, 0},
		{"-1e30", corev1.ResourceMemory, 0},
		{"0e100", corev1.ResourceCPU, 0},
		{"1e30", corev1.ResourceMemory, Unlimited},
		// Expanding this exponent would never finish.
		{"92230e1663287294", corev1.ResourceCPU, Unlimited},
		{"1e-60", "nvidia.com/gpu", 1},
		{"1n", corev1.ResourceCPU, 1},
		{"1500m", "nvidia.com/gpu", 2},
		{"250m", corev1.ResourceCPU, 250},
		{"8Gi", corev1.ResourceMemory, 8 << 30},
		// Whole numbers, read without a decimal: the bounds of each unit.
		{"2", corev1.ResourceCPU, 2000},
		{"1e3", corev1.ResourceCPU, 1_000_000},
		{"9223372036854775", corev1.ResourceCPU, 9223372036854775000},
		{"9223372036854776", corev1.ResourceCPU, Unlimited},
		{"9223372036854775806", corev1.ResourceMemory, MaxFinite},
		{"9223372036854775807", corev1.ResourceMemory, Unlimited},
		{"1Ei", "nvidia.com/gpu", 1 << 60},
	} {
		q, err := resource.ParseQuantity(tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		if got := FromQuantity(tc.name, q); got != tc.want {
			t.Errorf("FromQuantity(%s, %s) = %d, want %d", tc.name, tc.q, got, tc.want)
		}
	}
}

// TestFromQuantityWholeNoAlloc: a whole-number quantity, as most
// requests are, converts without an allocation.
func TestFromQuantityWholeNoAlloc(t *testing.T) {
	for _, s := range []string{"1", "8Gi", "64"} {
		q := resource.MustParse(s)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if n := testing.AllocsPerRun(100, func() { FromQuantity(name, q) }); n != 0 {
				t.Errorf("FromQuantity(%s, %s) allocates %v times, want 0", name, s, n)
			}
		}
	}
}

// TestAppendNames: the names are sorted after what dst held, which stays
// as it was; Names is the same on an empty slice.
func TestAppendNames(t *testing.T) {
	r := Resources{"memory": 1, "cpu": 2, "nvidia.com/gpu": 3}
	got := r.AppendNames([]corev1.ResourceName{"zzz"})
	want := []corev1.ResourceName{"zzz", "cpu", "memory", "nvidia.com/gpu"}
	if !slices.Equal(got, want) {
		t.Errorf("AppendNames = %v, want %v", got, want)
	}
	if names := r.Names(); !slices.Equal(names, want[1:]) {
		t.Errorf("Names = %v, want %v", names, want[1:])
	}
}
