package deviceclass

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestSelects(t *testing.T) {
	gpu := &resourcev1.Device{Name: "g0",
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"model":              {StringValue: ptr.To("a100")},
			"driverVersion":      {VersionValue: ptr.To("1.2.3")},
			"other.example/zone": {StringValue: ptr.To("z1")}},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}}}
	for _, tc := range []struct {
		name      string
		selectors []string
		notCEL    bool
		want      bool
		fault     string // a prefix
		err       string // a part
	}{
		{name: "no selectors select every device", want: true},
		{name: "the driver", selectors: []string{`device.driver == "gpu.example.com"`}, want: true},
		{name: "another driver", selectors: []string{`device.driver == "fpga.example.com"`}},
		{name: "an attribute of the driver's domain", selectors: []string{`device.attributes["gpu.example.com"].model == "a100"`}, want: true},
		{name: "an attribute of another domain", selectors: []string{`device.attributes["other.example"].zone == "z1"`}, want: true},
		{name: "a version", selectors: []string{`device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))`}, want: true},
		{name: "a capacity", selectors: []string{`device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0`}, want: true},
		{name: "all selectors, not any", selectors: []string{`device.driver == "gpu.example.com"`, `device.attributes["gpu.example.com"].model == "h100"`}},
		{name: "a missing attribute guarded", selectors: []string{`"gpu.example.com" in device.attributes && has(device.attributes["gpu.example.com"].mig) && device.attributes["gpu.example.com"].mig == "1g"`}},
		{name: "a missing attribute unguarded fails", selectors: []string{`device.attributes["gpu.example.com"].mig == "1g"`}, err: "spec.selectors[0].cel.expression failed: no such key: mig"},
		{name: "a selector that does not compile", selectors: []string{`device.driver ==`}, fault: "spec.selectors[0].cel.expression does not compile: compilation failed"},
		{name: "a selector that is not CEL", notCEL: true, fault: "spec.selectors[0] is not a CEL selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &resourcev1.DeviceClass{}
			for _, e := range tc.selectors {
				c.Spec.Selectors = append(c.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
			}
			if tc.notCEL {
				c.Spec.Selectors = append(c.Spec.Selectors, resourcev1.DeviceSelector{})
			}
			s := Compile(c)
			if !strings.HasPrefix(s.Fault(), tc.fault) || (tc.fault == "") != (s.Fault() == "") {
				t.Fatalf("fault %q, want one that starts %q", s.Fault(), tc.fault)
			}
			got, err := s.Selects("gpu.example.com", gpu)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Selects = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
