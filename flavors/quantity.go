package flavors

import (
	"errors"
	"fmt"
	"strconv"
)

// Bounds on a quantity's text, checked before it is parsed: parsing a
// text such as 1e-999999999 scales a big decimal by its exponent and runs
// for minutes, and so may arithmetic on what it returns. No resource
// request or quota needs more: 1e30 bytes is a million yottabytes.
const (
	// MaxQuantityText is the longest quantity text, in bytes.
	MaxQuantityText = 64
	// MaxQuantityExponent bounds the magnitude of a quantity's decimal
	// exponent, the 30 of 1e30 and 1e-30.
	MaxQuantityExponent = 30
)

// The errors CheckQuantityText wraps, to tell its two refusals apart.
var (
	ErrQuantityTooLong  = errors.New("quantity text too long")
	ErrQuantityExponent = errors.New("quantity exponent out of range")
)

// quantityTextError is a refusal of CheckQuantityText: a message for
// users, and which of the two it is.
type quantityTextError struct {
	msg  string
	kind error
}

func (e *quantityTextError) Error() string { return e.msg }
func (e *quantityTextError) Unwrap() error { return e.kind }

// CheckQuantityText rejects, without parsing it, a quantity text that
// resource.ParseQuantity may take minutes over: one longer than
// MaxQuantityText, or one in exponent form (a number, e or E, an optional
// sign and digits, as in 2e3 or 1.5E-7) whose exponent's magnitude
// exceeds MaxQuantityExponent. Other texts pass, valid or not: E, Ei, 1E
// and 1.5Ei are SI suffixes, and ParseQuantity rejects malformed texts at
// once. The error wraps ErrQuantityTooLong or ErrQuantityExponent; it
// quotes the text only when it is short.
func CheckQuantityText(s string) error {
	if len(s) > MaxQuantityText {
		return &quantityTextError{fmt.Sprintf("quantity of %d bytes is longer than the %d-byte limit", len(s), MaxQuantityText), ErrQuantityTooLong}
	}
	// Skip the number as ParseQuantity reads it: a sign, digits, a point
	// and digits, each optional; what follows is the suffix.
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	i = skipDigits(s, i)
	if i < len(s) && s[i] == '.' {
		i = skipDigits(s, i+1)
	}
	if i == len(s) || s[i] != 'e' && s[i] != 'E' {
		return nil
	}
	exp := s[i+1:]
	if exp != "" && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	if exp == "" || skipDigits(exp, 0) != len(exp) {
		return nil // not exponent form
	}
	for len(exp) > 1 && exp[0] == '0' {
		exp = exp[1:]
	}
	// More than two digits are beyond the bound, however many there are.
	if n, err := strconv.Atoi(exp); err == nil && len(exp) <= 2 && n <= MaxQuantityExponent {
		return nil
	}
	return &quantityTextError{fmt.Sprintf("quantity %q has a decimal exponent beyond ±%d", s, MaxQuantityExponent), ErrQuantityExponent}
}

// skipDigits returns the index of the first byte of s from i on that is
// not a decimal digit.
func skipDigits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}
