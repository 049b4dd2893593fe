package flavors

import (
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
