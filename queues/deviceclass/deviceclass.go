package deviceclass

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// Selector is a DeviceClass's selectors, compiled.
type Selector struct {
	exprs []dracel.CompilationResult
	fault string
}

// Compile compiles the selectors of c as the scheduler does (its
// features on: consumable capacity and list attributes, so every
// expression the API server accepted compiles). A selector that is not
// CEL, or that does not compile, makes the class select nothing, and
// Fault says why.
func Compile(c *resourcev1.DeviceClass) *Selector {
	compiler := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})
	s := &Selector{}
	for i, sel := range c.Spec.Selectors {
		if sel.CEL == nil {
			return &Selector{fault: fmt.Sprintf("spec.selectors[%d] is not a CEL selector, which tally cannot evaluate", i)}
		}
		r := compiler.CompileCELExpression(sel.CEL.Expression, dracel.Options{DisableCostEstimation: true})
		if r.Error != nil {
			return &Selector{fault: fmt.Sprintf("spec.selectors[%d].cel.expression does not compile: %s", i, r.Error.Detail)}
		}
		s.exprs = append(s.exprs, r)
	}
	return s
}

// Fault is why the class selects nothing: a selector that is not CEL or
// does not compile; "" when it compiled.
func (s *Selector) Fault() string { return s.fault }

// Selects says whether the class selects device d of driver: every one
// of its selectors is true of it (a class without selectors selects
// every device). An error says which selector failed on it, and why, as
// the scheduler would fail.
func (s *Selector) Selects(driver string, d *resourcev1.Device) (bool, error) {
	if s.fault != "" {
		return false, nil
	}
	in := dracel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity}
	for i, expr := range s.exprs {
		ok, _, err := expr.DeviceMatches(context.Background(), in)
		if err != nil {
			return false, fmt.Errorf("spec.selectors[%d].cel.expression failed: %w", i, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
