package kinds

import (
	"sort"
)

// JSONPatchOp is one operation of a JSON patch (RFC 6902).
type JSONPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// JSONPatch turns a merge patch of src, the object's content as JSON
// maps, into the JSON patch that makes the same change to src: an add
// for each value the merge patch sets (a whole object where src has none
// at that path, since a JSON patch cannot add into an object that does
// not exist), a remove for each null whose key src holds. Ops come in
// path order, so the patch is the same for the same input. A
// resourceVersion in the merge patch's metadata is left to the caller
// (see AdmissionPatch), since it is a precondition, not a change.
func JSONPatch(src map[string]any, p MergePatch) []JSONPatchOp {
	var ops []JSONPatchOp
	jsonPatchInto(&ops, nil, src, p, true)
	return ops
}

func jsonPatchInto(ops *[]JSONPatchOp, path []string, src map[string]any, p map[string]any, top bool) {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := p[k]
		at := Join(path, k)
		if top && k == "metadata" {
			if m, ok := v.(map[string]any); ok && m["resourceVersion"] != nil {
				m = shallowWithout(m, "resourceVersion")
				v = m
			}
		}
		old := src[k]
		has := old != nil
		switch val := v.(type) {
		case nil:
			if has {
				*ops = append(*ops, JSONPatchOp{Op: "remove", Path: Pointer(at)})
			}
		case map[string]any:
			if oldMap, ok := old.(map[string]any); ok {
				jsonPatchInto(ops, at, oldMap, val, false)
				continue
			}
			*ops = append(*ops, JSONPatchOp{Op: "add", Path: Pointer(at), Value: WithoutNulls(val)})
		default:
			*ops = append(*ops, JSONPatchOp{Op: "add", Path: Pointer(at), Value: val})
		}
	}
}

func shallowWithout(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// WithoutNulls is a merge patch's object as the value it leaves where
// there was nothing (RFC 7386): its nulls dropped, at every depth.
func WithoutNulls(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch val := v.(type) {
		case nil:
		case map[string]any:
			out[k] = WithoutNulls(val)
		default:
			out[k] = v
		}
	}
	return out
}
