package flavors

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Amount is a quantity of one resource in its canonical unit: millicores for
// cpu, and whole units (bytes, devices) for everything else.
//
// Overflow rule: arithmetic saturates. Any result that would exceed
// MaxFinite becomes Unlimited, and Unlimited absorbs every addition and
// multiplication; Unlimited minus a finite amount stays Unlimited. Amounts are
// never silently wrapped, so accounting cannot drift through overflow.
type Amount int64

const (
	// Unlimited is an unbounded amount, such as a missing borrowingLimit.
	Unlimited Amount = math.MaxInt64
	// MaxFinite is the largest amount that is not Unlimited.
	MaxFinite Amount = math.MaxInt64 - 1
)

// IsUnlimited reports whether a is Unlimited.
func (a Amount) IsUnlimited() bool { return a == Unlimited }

// Add returns a+b, saturating at Unlimited.
func (a Amount) Add(b Amount) Amount {
	if a == Unlimited || b == Unlimited {
		return Unlimited
	}
	s := a + b
	switch {
	case b > 0 && s < a, s > MaxFinite:
		return Unlimited
	case b < 0 && s > a:
		return math.MinInt64 + 1
	}
	return s
}

// Sub returns a-b. Unlimited minus a finite amount is Unlimited; a finite
// amount minus Unlimited is the most negative amount.
func (a Amount) Sub(b Amount) Amount {
	switch {
	case a == Unlimited:
		return Unlimited
	case b == Unlimited:
		return math.MinInt64 + 1
	}
	return a.Add(-b)
}

// Mul returns a*n for n >= 0, saturating at Unlimited.
func (a Amount) Mul(n int64) Amount {
	if n <= 0 || a == 0 {
		return 0
	}
	if a == Unlimited || a < 0 && a < (math.MinInt64+1)/Amount(n) || a > 0 && a > MaxFinite/Amount(n) {
		if a < 0 {
			return math.MinInt64 + 1
		}
		return Unlimited
	}
	return a * Amount(n)
}

// Min returns the smaller of a and b.
func Min(a, b Amount) Amount {
	if a < b {
		return a
	}
	return b
}

// Max returns the larger of a and b.
func Max(a, b Amount) Amount {
	if a > b {
		return a
	}
	return b
}

// FromQuantity converts q to the canonical unit of the named resource,
// rounding up. Quantities too large for an Amount become Unlimited; a
// negative quantity (which neither a request nor a quota may be) is 0.
func FromQuantity(name corev1.ResourceName, q resource.Quantity) Amount {
	if q.Sign() <= 0 {
		return 0
	}
	// Most requests are whole numbers held as an int64 ("1", "8Gi"): read
	// directly, with no decimal made. Their at most 19 digits are none of
	// the far-out magnitudes decided below.
	if v, ok := q.AsInt64(); ok {
		if name == corev1.ResourceCPU {
			if v > int64(MaxFinite)/1000 {
				return Unlimited
			}
			return Amount(v * 1000)
		}
		if Amount(v) > MaxFinite {
			return Unlimited
		}
		return Amount(v)
	}
	// Decide far-out magnitudes from the exponent alone: comparing them
	// would expand 10^exponent, which a hostile quantity makes endless.
	d := q.AsDec()
	digits := int64(len(d.UnscaledBig().Text(10)))
	switch exp := digits - int64(d.Scale()); {
	case exp > 40:
		return Unlimited
	case exp < -40:
		return 1 // the smallest positive amount, rounding up
	}
	if name == corev1.ResourceCPU {
		if q.Cmp(*resource.NewMilliQuantity(int64(MaxFinite)/1000*1000, resource.DecimalSI)) > 0 {
			return Unlimited
		}
		return Amount(q.MilliValue())
	}
	if q.Cmp(*resource.NewQuantity(int64(MaxFinite), resource.DecimalSI)) > 0 {
		return Unlimited
	}
	return Amount(q.Value())
}

// Quantity converts a back into a resource.Quantity for display.
func (a Amount) Quantity(name corev1.ResourceName) resource.Quantity {
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(int64(a), resource.DecimalSI)
	}
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
		return *resource.NewQuantity(int64(a), resource.BinarySI)
	}
	return *resource.NewQuantity(int64(a), resource.DecimalSI)
}

// Format renders a for the named resource, e.g. "500m", "8Gi", "unlimited".
func (a Amount) Format(name corev1.ResourceName) string {
	if a == Unlimited {
		return "unlimited"
	}
	q := a.Quantity(name)
	return q.String()
}

// Resources maps resource names to amounts.
type Resources map[corev1.ResourceName]Amount

// FromList converts a corev1.ResourceList.
func FromList(l corev1.ResourceList) Resources {
	r := make(Resources, len(l))
	for n, q := range l {
		r[n] = FromQuantity(n, q)
	}
	return r
}

// Names returns the resource names of r, sorted.
func (r Resources) Names() []corev1.ResourceName {
	return r.AppendNames(make([]corev1.ResourceName, 0, len(r)))
}

// AppendNames appends r's resource names, sorted, to dst and returns the
// result: a caller with a buffer of its own allocates nothing.
func (r Resources) AppendNames(dst []corev1.ResourceName) []corev1.ResourceName {
	start := len(dst)
	for n := range r {
		dst = append(dst, n)
	}
	slices.Sort(dst[start:])
	return dst
}

// Scaled returns r multiplied by n.
func (r Resources) Scaled(n int64) Resources {
	out := make(Resources, len(r))
	for k, v := range r {
		out[k] = v.Mul(n)
	}
	return out
}

// String renders r as "cpu=2, memory=8Gi", sorted by name.
func (r Resources) String() string {
	parts := make([]string, 0, len(r))
	for _, n := range r.Names() {
		parts = append(parts, fmt.Sprintf("%s=%s", n, r[n].Format(n)))
	}
	return strings.Join(parts, ", ")
}
