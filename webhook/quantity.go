package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
)

// Hostile quantities.
//
// Decoding a Job parses each of its quantities (requests, limits,
// overhead, emptyDir size limits, ...) with resource.ParseQuantity, which
// runs for minutes on a text such as 1e-999999999. The API server never
// sends one: it parsed every quantity and renders it anew. A client that
// reaches the webhook port directly can, so the Job webhooks look for such
// texts in the raw JSON first.
//
// A quantity reaches ParseQuantity as Quantity.UnmarshalJSON hands it over:
// a JSON string's bytes between the quotes, escapes left as they are, or a
// bare JSON number, trimmed of white space. A text is hostile when it could
// be a quantity (it holds only the bytes a quantity may) and
// flavors.CheckQuantityText rejects it. One scan of the raw bytes looks for
// hostile strings and numbers anywhere; they are rare, and only when there
// is one does a second walk follow the JSON along the Go type of a Job to
// tell whether it sits where a Quantity is decoded. A hostile text in a
// container's args, say, is not a quantity, and passes.

// checkQuantities answers a Job request whose object or old object holds a
// hostile quantity, with a 400 naming its field path. It returns nil when
// there is none, and must run before either is decoded.
func checkQuantities(req admission.Request, k kinds.Kind) *admission.Response {
	name := k.GVK().Kind
	for _, o := range [...]struct {
		raw  []byte
		what string
	}{{req.OldObject.Raw, "the old " + name}, {req.Object.Raw, name}} {
		if err := hostileQuantity(o.raw, k); err != nil {
			resp := admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: %w", o.what, err))
			return &resp
		}
	}
	return nil
}

// hostileQuantity returns an error naming the first hostile quantity of
// raw, the JSON of an object of kind k, or nil when it has none.
//
// The decoder reads an object whose apiVersion and kind are not k's into
// the type they name, whose quantities are elsewhere, and then fails; such
// an object with a hostile text anywhere is refused as not of kind k.
func hostileQuantity(raw []byte, k kinds.Kind) error {
	if !scan(raw) {
		return nil
	}
	// Read the kind as the decoder does; when it cannot, the decoder
	// fails too, before it parses any quantity.
	gvk, err := serializerjson.DefaultMetaFactory.Interpret(raw)
	if err != nil {
		return nil
	}
	want := k.GVK()
	if *gvk = withDefaults(*gvk, want); *gvk != want {
		return fmt.Errorf("apiVersion %q and kind %q are not %s %s", gvk.GroupVersion().String(), gvk.Kind, want.GroupVersion().String(), want.Kind)
	}
	w := &walker{data: raw, types: typesOf(k)}
	return w.value(w.types.root, nil)
}

// withDefaults fills in what the object leaves out of its apiVersion and
// kind as the JSON serializer does, from the kind decoded into.
func withDefaults(actual, def schema.GroupVersionKind) schema.GroupVersionKind {
	if actual.Kind == "" {
		actual.Kind = def.Kind
	}
	if actual.Version == "" && actual.Group == "" {
		actual.Group, actual.Version = def.Group, def.Version
	}
	if actual.Version == "" && actual.Group == def.Group {
		actual.Version = def.Version
	}
	return actual
}

// quantityByte marks the bytes a quantity's text may hold: a sign,
// digits, a decimal point, and the letters of its suffixes.
var quantityByte = func() (t [256]bool) {
	for _, c := range []byte("+-.0123456789eEinumkKMGTP") {
		t[c] = true
	}
	return t
}()

// isHostile reports whether text, as ParseQuantity would read it, is a
// hostile quantity.
func isHostile(text []byte) bool {
	exponent := false
	for _, c := range text {
		if !quantityByte[c] {
			return false
		}
		exponent = exponent || c == 'e' || c == 'E'
	}
	switch {
	case len(text) > flavors.MaxQuantityText:
		return true
	case !exponent:
		return false
	}
	return flavors.CheckQuantityText(string(text)) != nil
}

// trimmed is a JSON string's content as Quantity.UnmarshalJSON reads it.
func trimmed(s []byte) []byte {
	if len(s) > 0 && (isTrimmable(s[0]) || isTrimmable(s[len(s)-1])) {
		return bytes.TrimSpace(s)
	}
	return s
}

// isTrimmable reports whether c may start or end white space that
// bytes.TrimSpace removes.
func isTrimmable(c byte) bool { return c <= ' ' || c >= utf8.RuneSelf }

// scan reports whether raw holds a hostile text, as a string or a bare
// number, anywhere. A string that does not start as a quantity or white
// space may start is passed over whole.
func scan(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			j := i + 1
			if j < len(raw) && (quantityByte[raw[j]] || isTrimmable(raw[j])) {
				end := stringEnd(raw, i)
				if isHostile(trimmed(raw[j:end])) {
					return true
				}
				i = end
				continue
			}
			for j < len(raw) && raw[j] != '"' {
				if raw[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		case quantityByte[c]:
			j := i + 1
			for j < len(raw) && quantityByte[raw[j]] {
				j++
			}
			if isHostile(raw[i:j]) {
				return true
			}
			i = j - 1
		}
	}
	return false
}

// stringEnd returns the index of the quote that closes the JSON string
// opening at data[start], or len(data) when none does.
func stringEnd(data []byte, start int) int {
	for i := start + 1; i < len(data); i++ {
		k := bytes.IndexByte(data[i:], '"')
		if k < 0 {
			break
		}
		i += k
		escaped := false
		for j := i - 1; j > start && data[j] == '\\'; j-- {
			escaped = !escaped
		}
		if !escaped {
			return i
		}
	}
	return len(data)
}

// walker follows JSON along a Go type. Malformed JSON, which the decoder
// rejects before it parses any quantity, stops the walk early or leaves
// parts unvisited; the walk never fails on it.
type walker struct {
	data  []byte
	i     int
	types *typeInfo
}

func (w *walker) space() {
	for w.i < len(w.data) && (w.data[w.i] == ' ' || w.data[w.i] == '\t' || w.data[w.i] == '\n' || w.data[w.i] == '\r') {
		w.i++
	}
}

// value walks the value at w.i, decoded into a t at path p, and returns
// the error of its first hostile quantity.
func (w *walker) value(t reflect.Type, p *field.Path) error {
	w.space()
	if w.i >= len(w.data) {
		return nil
	}
	if t == quantityType {
		return w.quantity(p)
	}
	switch c := w.data[w.i]; {
	case c == '{' && t.Kind() == reflect.Struct:
		fields := w.types.fields[t]
		return w.object(func(key string) error {
			if ft, ok := fields[key]; ok {
				return w.value(ft, p.Child(key))
			}
			w.skip()
			return nil
		})
	case c == '{' && t.Kind() == reflect.Map:
		return w.object(func(key string) error { return w.value(deref(t.Elem()), p.Key(key)) })
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		n := 0
		return w.array(func() error {
			n++
			return w.value(deref(t.Elem()), p.Index(n-1))
		})
	}
	// A value of another JSON type than t is not decoded into it.
	w.skip()
	return nil
}

// quantity checks the value at w.i, decoded into a Quantity at path p.
// Objects and arrays fail to parse at once.
func (w *walker) quantity(p *field.Path) error {
	var text []byte
	switch c := w.data[w.i]; c {
	case '{', '[':
		w.skip()
		return nil
	case '"':
		end := stringEnd(w.data, w.i)
		text = trimmed(w.data[w.i+1 : end])
		w.i = end + 1
	default:
		start := w.i
		w.scalar()
		text = w.data[start:w.i]
	}
	if !isHostile(text) {
		return nil
	}
	return fmt.Errorf("%s: %w", p, flavors.CheckQuantityText(string(text)))
}

// object walks the members of the object at w.i, calling member with
// w.i at each value. member must consume the value.
func (w *walker) object(member func(key string) error) error {
	w.i++ // {
	for {
		w.space()
		if w.i >= len(w.data) || w.data[w.i] != '"' {
			w.i++ // } or malformed
			return nil
		}
		end := stringEnd(w.data, w.i)
		key := unquote(w.data[w.i:min(end+1, len(w.data))])
		w.i = end + 1
		w.space()
		if w.i >= len(w.data) || w.data[w.i] != ':' {
			return nil
		}
		w.i++
		before := w.i
		if err := member(key); err != nil {
			return err
		}
		w.space()
		if w.i <= before || w.i >= len(w.data) || w.data[w.i] != ',' {
			w.i++ // } or malformed
			return nil
		}
		w.i++
	}
}

// array walks the elements of the array at w.i, calling elem with w.i at
// each. elem must consume the element.
func (w *walker) array(elem func() error) error {
	w.i++ // [
	w.space()
	if w.i < len(w.data) && w.data[w.i] == ']' {
		w.i++
		return nil
	}
	for {
		before := w.i
		if err := elem(); err != nil {
			return err
		}
		w.space()
		if w.i <= before || w.i >= len(w.data) || w.data[w.i] != ',' {
			w.i++ // ] or malformed
			return nil
		}
		w.i++
	}
}

// skip consumes the value at w.i, whatever it holds.
func (w *walker) skip() {
	w.space()
	depth := 0
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case '"':
			w.i = stringEnd(w.data, w.i) + 1
		case '{', '[':
			depth++
			w.i++
		case '}', ']':
			if depth == 0 {
				return // malformed: no value
			}
			depth--
			w.i++
		default:
			if depth == 0 {
				w.scalar()
				return
			}
			w.i++
		}
		if depth == 0 {
			return
		}
	}
}

// scalar consumes a number or literal at w.i.
func (w *walker) scalar() {
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case ',', '}', ']', ':', '"', ' ', '\t', '\n', '\r':
			return
		}
		w.i++
	}
}

// unquote decodes a JSON string, as the decoder decodes object keys.
func unquote(quoted []byte) string {
	if len(quoted) < 2 {
		return ""
	}
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(quoted, &s)
	return s
}

var quantityType = reflect.TypeFor[resource.Quantity]()

// typeInfo is what the walk needs of a type and the types it holds: which
// hold a Quantity, and the JSON names of their struct fields that do.
type typeInfo struct {
	root   reflect.Type
	holds  map[reflect.Type]bool
	fields map[reflect.Type]map[string]reflect.Type
}

// shapes holds the typeInfo of each kind's Shape, by its type.
var shapes sync.Map

// typesOf returns the typeInfo of k's Shape.
func typesOf(k kinds.Kind) *typeInfo {
	t := reflect.TypeOf(k.Shape())
	if ti, ok := shapes.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti, _ := shapes.LoadOrStore(t, newTypeInfo(t))
	return ti.(*typeInfo)
}

// deref strips pointers, which JSON does not see.
func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// newTypeInfo gathers the types that root holds, through struct fields,
// map values and slice elements, and which of them hold a Quantity. A type
// that decodes itself (a json.Unmarshaler) is followed as a struct like
// any other: should one hold a Quantity, its fields are checked as if they
// were decoded as usual, which can only refuse more.
func newTypeInfo(root reflect.Type) *typeInfo {
	root = deref(root)
	all := map[reflect.Type]map[string]reflect.Type{}
	var types []reflect.Type
	seen := map[reflect.Type]bool{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		if t = deref(t); seen[t] {
			return
		}
		seen[t] = true
		types = append(types, t)
		switch t.Kind() {
		case reflect.Struct:
			if t == quantityType {
				return
			}
			all[t] = jsonFields(t)
			for _, ft := range all[t] {
				visit(ft)
			}
		case reflect.Map, reflect.Slice, reflect.Array:
			visit(t.Elem())
		}
	}
	visit(root)
	// Types may hold each other; settle which hold a Quantity.
	holds := map[reflect.Type]bool{quantityType: true}
	for changed := true; changed; {
		changed = false
		for _, t := range types {
			h := holds[t]
			switch t.Kind() {
			case reflect.Struct:
				for _, ft := range all[t] {
					h = h || holds[ft]
				}
			case reflect.Map, reflect.Slice, reflect.Array:
				h = h || holds[deref(t.Elem())]
			}
			if h && !holds[t] {
				holds[t], changed = true, true
			}
		}
	}
	fields := map[reflect.Type]map[string]reflect.Type{}
	for t, fs := range all {
		if !holds[t] {
			continue
		}
		fields[t] = map[string]reflect.Type{}
		for name, ft := range fs {
			if holds[ft] {
				fields[t][name] = ft
			}
		}
	}
	return &typeInfo{root: root, holds: holds, fields: fields}
}

// jsonFields maps the JSON names of struct t's fields to their types,
// pointers stripped, by encoding/json's rules, which the decoder keeps
// (it only matches names case-sensitively): a tag names a field, "-"
// drops it, the fields of an embedded struct with no name in its tag
// (such as `json:",inline"`) are promoted, and of fields of one name the
// shallowest wins, then the tagged one, and a tie drops them all.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	type candidate struct {
		typ    reflect.Type
		depth  int
		tagged bool
	}
	byName := map[string][]candidate{}
	visited := map[reflect.Type]bool{}
	current := []reflect.Type{t}
	for depth := 0; len(current) > 0; depth++ {
		var next []reflect.Type
		for _, st := range current {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				sf := st.Field(i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if !sf.IsExported() && !(sf.Anonymous && ft.Kind() == reflect.Struct) {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, ft)
					continue
				}
				if !sf.IsExported() {
					continue
				}
				tagged := name != ""
				if !tagged {
					name = sf.Name
				}
				byName[name] = append(byName[name], candidate{deref(sf.Type), depth, tagged})
			}
		}
		current = next
	}
	out := map[string]reflect.Type{}
	for name, cs := range byName {
		best, tie := cs[0], false
		for _, c := range cs[1:] {
			switch {
			case c.depth < best.depth || c.depth == best.depth && c.tagged && !best.tagged:
				best, tie = c, false
			case c.depth == best.depth && c.tagged == best.tagged:
				tie = true
			}
		}
		if !tie {
			out[name] = best.typ
		}
	}
	return out
}
