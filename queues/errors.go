package queues

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// yamlLine matches the line numbers in YAML errors ("line 12: ...").
var yamlLine = regexp.MustCompile(`line (\d+):`)

// yamlError renders a YAML error on one line, with line numbers counted
// from the start of the input rather than of the document.
func yamlError(err error, firstLine int) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	return yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, convErr := strconv.Atoi(m[len("line ") : len(m)-1])
		if convErr != nil {
			return m
		}
		return fmt.Sprintf("line %d:", n+firstLine-1)
	})
}

// decodeError turns a JSON decoding error into a field error. A type
// mismatch becomes "must be a list, not a string" at the field's path;
// anything else is reported as is. rootDetail, if set, replaces the
// message of a mismatch at the root.
func decodeError(root *field.Path, err error, rootDetail string) *field.Error {
	got, path, want, ok := typeError(err)
	if !ok {
		return withDetail(field.Invalid(root, nil, ""), "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if path == "" {
		detail := fmt.Sprintf("must be %s, not %s", want, got)
		if rootDetail != "" {
			detail = fmt.Sprintf("%s, not %s", rootDetail, got)
		}
		return withDetail(field.TypeInvalid(root, nil, ""), "%s", detail)
	}
	e := withDetail(field.TypeInvalid(root, nil, ""), "must be %s, not %s", want, got)
	if want == "a string" && (got == "a boolean" || got == "a number") {
		// YAML reads true, no, y and 10 unquoted as booleans and numbers.
		e.Detail += "; quote it"
	}
	e.Field = root.String() + "." + path
	return e
}

// typeError unpacks a JSON type mismatch: what was found, at which dotted
// path, and what was expected. The decoder's error type is internal to its
// module, so its exported fields are read by reflection.
func typeError(err error) (got, path, want string, ok bool) {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return "", "", "", false
	}
	v = v.Elem()
	value, fieldPath, typ := v.FieldByName("Value"), v.FieldByName("Field"), v.FieldByName("Type")
	if value.Kind() != reflect.String || fieldPath.Kind() != reflect.String || !typ.IsValid() || !typ.CanInterface() {
		return "", "", "", false
	}
	t, isType := typ.Interface().(reflect.Type)
	if !isType || t == nil {
		return "", "", "", false
	}
	return describeJSON(value.String()), fieldPath.String(), describeKind(t), true
}

// describeJSON names a JSON value as the decoder reports it ("array",
// "number 1.5").
func describeJSON(v string) string {
	switch {
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case v == "string":
		return "a string"
	case v == "bool":
		return "a boolean"
	case strings.HasPrefix(v, "number"):
		return "a number"
	}
	return v
}

func describeKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "an object"
}

// Shorten cuts a value for display in a message.
func Shorten(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
