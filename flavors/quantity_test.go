package flavors

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCheckQuantityText(t *testing.T) {
	long := "1" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		text string
		// kind is the error wrapped, nil when the text passes; msg is the
		// whole message.
		kind error
		msg  string
	}{
		// Ordinary quantities, and SI suffixes that are not exponents.
		{text: "0"},
		{text: "1"},
		{text: "100m"},
		{text: "32Gi"},
		{text: "1.5Ei"},
		{text: "99999999999Ei"},
		{text: "E"},
		{text: "Ei"},
		{text: "1E"},
		{text: "1e"},
		{text: "500M"},
		{text: "-1"},
		{text: "+.5"},
		{text: "9223372036854775807"},
		// Exponents within the bound, however written.
		{text: "2e3"},
		{text: "1e30"},
		{text: "1e-30"},
		{text: "1E+30"},
		{text: "-1.5E-30"},
		{text: ".5e30"},
		{text: "e30"},
		{text: "1e030"},
		{text: "1e-0000000000000000000000000000000000000000000000000000000030"},
		{text: "1e0"},
		// Not exponent form: ParseQuantity rejects these at once.
		{text: "1e+"},
		{text: "1e-"},
		{text: "1ee99"},
		{text: "1e99x"},
		{text: "1e9.9"},
		{text: "1Ei99"},
		{text: "x1e99"},
		{text: "1e 99"},
		{text: "lots"},
		{text: ""},
		// Exponents beyond the bound.
		{text: "1e31", kind: ErrQuantityExponent, msg: `quantity "1e31" has a decimal exponent beyond ±30`},
		{text: "1e-31", kind: ErrQuantityExponent, msg: `quantity "1e-31" has a decimal exponent beyond ±30`},
		{text: "1E+031", kind: ErrQuantityExponent, msg: `quantity "1E+031" has a decimal exponent beyond ±30`},
		{text: "e99", kind: ErrQuantityExponent, msg: `quantity "e99" has a decimal exponent beyond ±30`},
		{text: "1e100", kind: ErrQuantityExponent, msg: `quantity "1e100" has a decimal exponent beyond ±30`},
		{text: "1e300000", kind: ErrQuantityExponent, msg: `quantity "1e300000" has a decimal exponent beyond ±30`},
		{text: "1e-30000000", kind: ErrQuantityExponent, msg: `quantity "1e-30000000" has a decimal exponent beyond ±30`},
		{text: "9223e-3000000", kind: ErrQuantityExponent, msg: `quantity "9223e-3000000" has a decimal exponent beyond ±30`},
		{text: "9223E7203685477580927", kind: ErrQuantityExponent, msg: `quantity "9223E7203685477580927" has a decimal exponent beyond ±30`},
		{text: "1E-2147483648", kind: ErrQuantityExponent, msg: `quantity "1E-2147483648" has a decimal exponent beyond ±30`},
		{text: "-0.000001e-999999999", kind: ErrQuantityExponent, msg: `quantity "-0.000001e-999999999" has a decimal exponent beyond ±30`},
		// int32(4294967297) is 1: ParseQuantity would read it as 1e1.
		{text: "1e4294967297", kind: ErrQuantityExponent, msg: `quantity "1e4294967297" has a decimal exponent beyond ±30`},
		// Overflowing int64 and any int.
		{text: "1e99999999999999999999999999", kind: ErrQuantityExponent, msg: `quantity "1e99999999999999999999999999" has a decimal exponent beyond ±30`},
		{text: "1e-" + strings.Repeat("9", 60), kind: ErrQuantityExponent, msg: `quantity "1e-` + strings.Repeat("9", 60) + `" has a decimal exponent beyond ±30`},
		// Length: 64 bytes pass, 65 do not, whatever they hold.
		{text: long[:64]},
		{text: long, kind: ErrQuantityTooLong, msg: "quantity of 65 bytes is longer than the 64-byte limit"},
		{text: strings.Repeat("x", 65), kind: ErrQuantityTooLong, msg: "quantity of 65 bytes is longer than the 64-byte limit"},
		{text: "1e-" + strings.Repeat("9", 3<<20), kind: ErrQuantityTooLong, msg: "quantity of 3145731 bytes is longer than the 64-byte limit"},
	} {
		name := tc.text
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			err := CheckQuantityText(tc.text)
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("CheckQuantityText(%q) = %v, want nil", tc.text, err)
				}
				return
			}
			if err == nil || !errors.Is(err, tc.kind) || err.Error() != tc.msg {
				t.Fatalf("CheckQuantityText(%q) = %v, want %q wrapping %v", tc.text, err, tc.msg, tc.kind)
			}
			other := ErrQuantityTooLong
			if tc.kind == ErrQuantityTooLong {
				other = ErrQuantityExponent
			}
			if errors.Is(err, other) {
				t.Errorf("CheckQuantityText(%q) = %v also wraps %v", tc.text, err, other)
			}
		})
	}
}

// FuzzCheckQuantityText checks that every text CheckQuantityText passes
// and resource.ParseQuantity accepts is a quantity of bounded scale, and
// that every text it rejects for its exponent is one ParseQuantity reads
// as exponent form. A text that slips through with a huge exponent makes
// the fuzzer hang rather than fail, which it reports as well.
func FuzzCheckQuantityText(f *testing.F) {
	for _, s := range []string{"1", "100m", "32Gi", "1.5Ei", "1e30", "1e-30", "1e31", ".5e-30", "9223E7203685477580927", "1E-2147483648", "1e4294967297", "e99", "0.000000000000000000000000000001e-30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckQuantityText(s)
		if errors.Is(err, ErrQuantityExponent) {
			if i := strings.IndexAny(s, "eE"); i < 0 || strings.ContainsAny(s[:i], "eEinumkKMGTP") {
				t.Fatalf("%q rejected for its exponent, but it is not in exponent form", s)
			}
			return
		}
		if err != nil {
			if len(s) <= MaxQuantityText {
				t.Fatalf("%q of %d bytes rejected: %v", s, len(s), err)
			}
			return
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return
		}
		// At most 64 digits and an exponent of at most 30 either way.
		if scale := q.AsDec().Scale(); scale > MaxQuantityText+MaxQuantityExponent || scale < -(MaxQuantityText+MaxQuantityExponent) {
			t.Fatalf("%q passed with scale %d", s, scale)
		}
	})
}
