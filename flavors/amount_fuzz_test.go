package flavors

import (
	"math"
	"math/big"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzAmount checks quota arithmetic against exact big-integer arithmetic
// and quantity parsing against the quantities themselves.
//
// The domain is what tally computes with: requests and quotas are
// non-negative (the API server rejects negative requests, the config
// parser negative quotas), and differences of them may be negative.
func FuzzAmount(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), "0", "0")
	f.Add(int64(1), int64(2), int64(3), "500m", "0.5")
	f.Add(int64(math.MaxInt64), int64(1), int64(2), "1e30", "9223372036854775807")
	f.Add(int64(math.MaxInt64-1), int64(math.MaxInt64-1), int64(math.MaxInt64), "99999999999Ei", "1Ei")
	f.Add(int64(1<<62), int64(1<<62), int64(4), "9223372036854775.807", "9223372036854775")
	f.Add(int64(1000), int64(999), int64(-1), "1e-30", "1n")
	f.Add(int64(3037000500), int64(7), int64(3037000500), "8Gi", "8G")
	f.Add(int64(1), int64(1), int64(1), "-9223372036854776", "-1e30")
	f.Fuzz(func(t *testing.T, x, y, n int64, s1, s2 string) {
		a, b := Amount(x&math.MaxInt64), Amount(y&math.MaxInt64)
		checkArithmetic(t, a, b, n)
		if longExponent.MatchString(s1) || longExponent.MatchString(s2) {
			// resource.ParseQuantity itself can take unbounded time on
			// such exponents; the API server stores no such request.
			return
		}
		q1, err1 := resource.ParseQuantity(s1)
		q2, err2 := resource.ParseQuantity(s2)
		if err1 != nil || err2 != nil {
			return
		}
		if q1.Sign() < 0 {
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "nvidia.com/gpu"} {
				if a := FromQuantity(name, q1); a != 0 {
					t.Fatalf("%s %s: a negative quantity converts to %d, want 0", name, s1, a)
				}
			}
			return
		}
		if q2.Sign() < 0 {
			return
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "nvidia.com/gpu"} {
			checkQuantity(t, name, q1)
			if m1, m2 := magnitude(q1), magnitude(q2); m1 > 40 || m1 < -40 || m2 > 40 || m2 < -40 {
				continue
			}
			if c := q1.Cmp(q2); c != 0 {
				lo, hi := FromQuantity(name, q1), FromQuantity(name, q2)
				if c > 0 {
					lo, hi = hi, lo
				}
				if lo > hi {
					t.Fatalf("%s: %s and %s convert out of order: %d > %d", name, s1, s2, lo, hi)
				}
			}
		}
	})
}

var (
	bigMaxFinite = big.NewInt(int64(MaxFinite))
	mostNegative = Amount(math.MinInt64 + 1)
)

// saturate is the documented rule applied to an exact result.
func saturate(v *big.Int) Amount {
	switch {
	case v.Cmp(bigMaxFinite) > 0:
		return Unlimited
	case v.Cmp(big.NewInt(int64(mostNegative))) < 0:
		return mostNegative
	}
	return Amount(v.Int64())
}

func exact(a Amount) *big.Int { return big.NewInt(int64(a)) }

// checkArithmetic checks Add, Sub and Mul on non-negative a and b, and on
// the difference of the two.
func checkArithmetic(t *testing.T, a, b Amount, n int64) {
	t.Helper()
	sum := a.Add(b)
	want := saturate(new(big.Int).Add(exact(a), exact(b)))
	if a.IsUnlimited() || b.IsUnlimited() {
		want = Unlimited
	}
	if sum != want || b.Add(a) != sum {
		t.Fatalf("%d + %d = %d (reversed %d), want %d", a, b, sum, b.Add(a), want)
	}
	if sum < a || sum < b {
		t.Fatalf("%d + %d = %d is less than an operand", a, b, sum)
	}

	diff := a.Sub(b)
	switch {
	case a.IsUnlimited():
		want = Unlimited
	case b.IsUnlimited():
		want = mostNegative
	default:
		want = Amount(new(big.Int).Sub(exact(a), exact(b)).Int64())
	}
	if diff != want {
		t.Fatalf("%d - %d = %d, want %d", a, b, diff, want)
	}
	if !a.IsUnlimited() && !b.IsUnlimited() && diff.Add(b) != a {
		t.Fatalf("(%d - %d) + %d = %d, want %d back", a, b, b, diff.Add(b), a)
	}
	// A negative difference plus a request, as free quota is used.
	if !diff.IsUnlimited() && !b.IsUnlimited() {
		got, want := diff.Add(b), saturate(new(big.Int).Add(exact(diff), exact(b)))
		if got != want {
			t.Fatalf("%d + %d = %d, want %d", diff, b, got, want)
		}
	}

	prod := a.Mul(n)
	switch {
	case n <= 0:
		want = 0
	case a.IsUnlimited():
		want = Unlimited
	default:
		want = saturate(new(big.Int).Mul(exact(a), big.NewInt(n)))
	}
	if prod != want {
		t.Fatalf("%d * %d = %d, want %d", a, n, prod, want)
	}
	if Min(a, b) > Max(a, b) || Min(a, b) != Min(b, a) || Max(a, b) != Max(b, a) {
		t.Fatalf("Min/Max of %d, %d: %d, %d", a, b, Min(a, b), Max(a, b))
	}

	// A finite amount survives the trip through a Quantity.
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !a.IsUnlimited() && (name != corev1.ResourceCPU || a <= MaxFinite/1000*1000) {
			if got := FromQuantity(name, a.Quantity(name)); got != a {
				t.Fatalf("%s: %d -> %s -> %d", name, a, a.Format(name), got)
			}
		}
	}
}

// checkQuantity checks that FromQuantity rounds a non-negative q up to the
// next unit, and saturates only what does not fit.
func checkQuantity(t *testing.T, name corev1.ResourceName, q resource.Quantity) {
	t.Helper()
	a := FromQuantity(name, q)
	if a < 0 {
		t.Fatalf("%s %s: negative amount %d", name, q.String(), a)
	}
	if q.Sign() == 0 {
		if a != 0 {
			t.Fatalf("%s %s: zero converts to %d", name, q.String(), a)
		}
		return
	}
	// Far-out magnitudes are checked by their exponent: comparing them
	// would expand 10^exponent.
	switch exp := magnitude(q); {
	case exp > 40 && !a.IsUnlimited():
		t.Fatalf("%s %s: about 10^%d converts to %d, want Unlimited", name, q.String(), exp, a)
	case exp < -40 && a != 1:
		t.Fatalf("%s %s: about 10^%d converts to %d, want 1", name, q.String(), exp, a)
	case exp > 40 || exp < -40:
		return
	}
	if a.IsUnlimited() {
		limit := resource.NewQuantity(int64(MaxFinite), resource.DecimalSI)
		if name == corev1.ResourceCPU {
			limit = resource.NewQuantity(int64(MaxFinite)/1000, resource.DecimalSI)
		}
		if q.Cmp(*limit) <= 0 {
			t.Fatalf("%s %s: Unlimited, but it fits", name, q.String())
		}
		return
	}
	if got := a.Quantity(name); got.Cmp(q) < 0 {
		t.Fatalf("%s %s: %d is less than the quantity", name, q.String(), a)
	}
	if below := (a - 1).Quantity(name); a > 0 && below.Cmp(q) >= 0 {
		t.Fatalf("%s %s: %d is more than one unit above the quantity", name, q.String(), a)
	}
}

// magnitude is the decimal exponent of q's leading digit, plus one.
func magnitude(q resource.Quantity) int64 {
	d := q.AsDec()
	return int64(len(d.UnscaledBig().Text(10))) - int64(d.Scale())
}

// longExponent matches a decimal exponent of more than three digits.
var longExponent = regexp.MustCompile(`[eE][+-]?0*[0-9]{4,}`)
