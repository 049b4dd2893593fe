package queues_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// mappings is a v1beta2 Configuration document whose
// resources.deviceClassMappings is body (YAML, indented under it).
func mappings(body string) string {
	return kueueConfig("v1beta2", "featureGates: {DisableWaitForPodsReady: true}\nresources:\n  deviceClassMappings:\n"+body)
}

func TestParseDeviceClassMappings(t *testing.T) {
	cfg, warnings, errs := queues.Parse([]byte(mappings(
		"  - name: example.com/gpu\n    deviceClassNames: [gpu.example.com, big-gpu.example.com]\n" +
			"  - name: example.com/nic\n    deviceClassNames: [nic.example.com]\n")))
	if len(errs) > 0 {
		t.Fatalf("errors: %v", queues.FormatErrors(errs))
	}
	for _, w := range warnings {
		if strings.Contains(w, "resources") {
			t.Errorf("warning about the section tally reads: %s", w)
		}
	}
	want := map[string]corev1.ResourceName{"gpu.example.com": "example.com/gpu", "big-gpu.example.com": "example.com/gpu", "nic.example.com": "example.com/nic"}
	if diff := cmp.Diff(want, cfg.DeviceClasses); diff != "" {
		t.Errorf("DeviceClasses (-want +got):\n%s", diff)
	}
	cfg, _, errs = queues.Parse([]byte(kueueConfig("v1beta2", "featureGates: {DisableWaitForPodsReady: true}\n")))
	if len(errs) > 0 || cfg.DeviceClasses != nil {
		t.Errorf("without mappings: DeviceClasses %v, errors %v", cfg.DeviceClasses, errs)
	}
}

func TestParseDeviceClassMappingsErrors(t *testing.T) {
	const p = "Configuration.resources.deviceClassMappings"
	for name, tc := range map[string]struct {
		in   string
		want []string
	}{
		"a class in two mappings": {
			in: "  - {name: example.com/gpu, deviceClassNames: [gpu.example.com]}\n  - {name: example.com/other, deviceClassNames: [a.example.com, gpu.example.com]}\n",
			want: []string{p + `[1].deviceClassNames[1]: DeviceClass "gpu.example.com" is mapped twice: in ` + p +
				`[0].deviceClassNames[0] and here; a class's devices are charged as one resource`},
		},
		"an empty list": {
			in:   "  - {name: example.com/gpu, deviceClassNames: []}\n",
			want: []string{p + "[0].deviceClassNames: must name at least one DeviceClass"},
		},
		"no list": {
			in:   "  - {name: example.com/gpu}\n",
			want: []string{p + "[0].deviceClassNames: must name at least one DeviceClass"},
		},
		"no name": {
			in:   "  - {deviceClassNames: [gpu.example.com]}\n",
			want: []string{p + "[0].name: is required"},
		},
		"a name that is not a resource name": {
			in:   "  - {name: 'example.com/a gpu', deviceClassNames: [gpu.example.com]}\n",
			want: []string{p + `[0].name: "example.com/a gpu" is not a valid resource name: it must be a qualified name such as cpu, memory or example.com/gpu`},
		},
		"a class name that is not a name": {
			in:   "  - {name: example.com/gpu, deviceClassNames: [GPU_Class]}\n",
			want: []string{p + `[0].deviceClassNames[0]: "GPU_Class" is not a valid DeviceClass name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		"counters of partitionable devices": {
			in: "  - name: example.com/mig\n    deviceClassNames: [mig.example.com]\n    sources:\n    - counter: memory\n      deviceSelector: 'true'\n",
			want: []string{p + "[0].sources: tally does not charge device counters or capacities (partitionable devices, such as MIG slices, that consume counters their ResourceSlices publish, " +
				"and devices shared by capacity); map the classes of whole devices with deviceClassNames, or leave this mapping out"},
		},
		"an unknown field of a mapping": {
			in:   "  - {name: example.com/gpu, deviceClassNames: [gpu.example.com], weight: 2}\n",
			want: []string{p + "[0].weight: unknown field: a mapping has name and deviceClassNames"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, _, errs := queues.Parse([]byte(mappings(tc.in)))
			if cfg != nil {
				t.Errorf("Parse returned a Config despite errors")
			}
			if diff := cmp.Diff(tc.want, queues.FormatErrors(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// claimTemplate is a ResourceClaimTemplate named name with the given
// device requests.
func claimTemplate(name string, reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaimTemplate {
	t := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	t.Spec.Spec.Devices.Requests = reqs
	return t
}

func exactly(name, class string, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count}}
}

func fromTemplate(name string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: "c-" + name, ResourceClaimTemplateName: &name}
}

func TestClaimRequests(t *testing.T) {
	classes := map[string]corev1.ResourceName{"gpu.example.com": "example.com/gpu", "big.example.com": "example.com/gpu", "nic.example.com": "example.com/nic"}
	all := exactly("all", "gpu.example.com", 0)
	all.Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
	admin := exactly("admin", "gpu.example.com", 1)
	admin.Exactly.AdminAccess = new(bool)
	*admin.Exactly.AdminAccess = true
	notAdmin := exactly("plain", "gpu.example.com", 2)
	notAdmin.Exactly.AdminAccess = new(bool)
	alternatives := resourcev1.DeviceRequest{Name: "any", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "big", DeviceClassName: "big.example.com", Count: 1},
		{Name: "small", DeviceClassName: "gpu.example.com", Count: 4},
		{Name: "nic", DeviceClassName: "nic.example.com", Count: 2},
	}}
	unmappedAlternative := resourcev1.DeviceRequest{Name: "any", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "gpu", DeviceClassName: "gpu.example.com", Count: 1},
		{Name: "fpga", DeviceClassName: "fpga.example.com", Count: 1},
	}}
	allAlternative := resourcev1.DeviceRequest{Name: "any", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "gpu", DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeAll},
	}}
	templates := map[string]*resourcev1.ResourceClaimTemplate{
		"one":      claimTemplate("one", exactly("gpu", "gpu.example.com", 0)),
		"three":    claimTemplate("three", exactly("gpu", "gpu.example.com", 3)),
		"mixed":    claimTemplate("mixed", exactly("gpu", "gpu.example.com", 2), exactly("nic", "nic.example.com", 1), exactly("more", "big.example.com", 1)),
		"unmapped": claimTemplate("unmapped", exactly("gpu", "gpu.example.com", 1), exactly("fpga", "fpga.example.com", 1)),
		"all":      claimTemplate("all", all),
		"admin":    claimTemplate("admin", admin),
		"notadmin": claimTemplate("notadmin", notAdmin),
		"first":    claimTemplate("first", alternatives),
		"firstbad": claimTemplate("firstbad", unmappedAlternative),
		"firstall": claimTemplate("firstall", allAlternative),
		"empty":    claimTemplate("empty"),
	}
	d := &queues.PodDefaults{Config: &queues.Config{DeviceClasses: classes}, ClaimTemplates: templates}
	direct := "shared"
	for name, tc := range map[string]struct {
		claims []corev1.PodResourceClaim
		d      *queues.PodDefaults
		want   flavors.Resources
		why    string
	}{
		"no claims":                        {},
		"no claims, no defaults":           {d: nil},
		"count left out is one device":     {claims: []corev1.PodResourceClaim{fromTemplate("one")}, want: flavors.Resources{"example.com/gpu": 1}},
		"a count":                          {claims: []corev1.PodResourceClaim{fromTemplate("three")}, want: flavors.Resources{"example.com/gpu": 3}},
		"two claims add up":                {claims: []corev1.PodResourceClaim{fromTemplate("one"), fromTemplate("three")}, want: flavors.Resources{"example.com/gpu": 4}},
		"the same template twice, twice":   {claims: []corev1.PodResourceClaim{fromTemplate("three"), {Name: "again", ResourceClaimTemplateName: ptr("three")}}, want: flavors.Resources{"example.com/gpu": 6}},
		"requests of several classes":      {claims: []corev1.PodResourceClaim{fromTemplate("mixed")}, want: flavors.Resources{"example.com/gpu": 3, "example.com/nic": 1}},
		"adminAccess false is charged":     {claims: []corev1.PodResourceClaim{fromTemplate("notadmin")}, want: flavors.Resources{"example.com/gpu": 2}},
		"a template without requests":      {claims: []corev1.PodResourceClaim{fromTemplate("empty")}},
		"firstAvailable: the most of each": {claims: []corev1.PodResourceClaim{fromTemplate("first")}, want: flavors.Resources{"example.com/gpu": 4, "example.com/nic": 2}},
		"a claim named directly": {
			claims: []corev1.PodResourceClaim{fromTemplate("one"), {Name: "s", ResourceClaimName: &direct}},
			why:    `spec.resourceClaims[1].resourceClaimName: the pods name ResourceClaim "shared" directly, which the pods of other workloads may share, and tally charges devices only per pod: name a ResourceClaimTemplate in resourceClaimTemplateName instead`,
		},
		"a template that does not exist": {
			claims: []corev1.PodResourceClaim{fromTemplate("missing")},
			why:    `spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate "missing" not found; the workload waits until it exists`,
		},
		"no defaults to read templates from": {
			claims: []corev1.PodResourceClaim{fromTemplate("one")}, d: nil,
			why: `spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate "one" not found; the workload waits until it exists`,
		},
		"a class no mapping names": {
			claims: []corev1.PodResourceClaim{fromTemplate("one"), fromTemplate("unmapped")},
			why: `spec.resourceClaims[1].resourceClaimTemplateName: ResourceClaimTemplate "unmapped": spec.spec.devices.requests[1].exactly.deviceClassName: ` +
				`DeviceClass "fpga.example.com" is not mapped to a resource, so tally cannot charge its devices: add it to the deviceClassNames of a mapping in the Configuration document's resources.deviceClassMappings`,
		},
		"allocationMode All": {
			claims: []corev1.PodResourceClaim{fromTemplate("all")},
			why: `spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate "all": spec.spec.devices.requests[0].exactly.allocationMode: ` +
				`All asks for every matching device, however many there are, which tally cannot charge; ask for a count (ExactCount)`,
		},
		"adminAccess": {
			claims: []corev1.PodResourceClaim{fromTemplate("admin")},
			why: `spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate "admin": spec.spec.devices.requests[0].exactly.adminAccess: ` +
				`a request with admin access gets devices that are in use by others, outside any quota; tally admits no such workload`,
		},
		"firstAvailable with an unmapped alternative": {
			claims: []corev1.PodResourceClaim{fromTemplate("firstbad")},
			why: `spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate "firstbad": spec.spec.devices.requests[0].firstAvailable[1].deviceClassName: ` +
				`DeviceClass "fpga.example.com" is not mapped to a resource, so tally cannot charge its devices: add it to the deviceClassNames of a mapping in the Configuration document's resources.deviceClassMappings`,
		},
		"firstAvailable with an alternative of All": {
			claims: []corev1.PodResourceClaim{fromTemplate("firstall")},
			why: `spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate "firstall": spec.spec.devices.requests[0].firstAvailable[0].allocationMode: ` +
				`All asks for every matching device, however many there are, which tally cannot charge; ask for a count (ExactCount)`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			dd := d
			if strings.Contains(name, "no defaults") {
				dd = tc.d
			}
			got, why := dd.ClaimRequests(&corev1.PodSpec{ResourceClaims: tc.claims})
			if why != tc.why {
				t.Errorf("why:\n got %s\nwant %s", why, tc.why)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// A stripped template is charged as the template itself.
func TestStripClaimTemplate(t *testing.T) {
	full := claimTemplate("t", exactly("gpu", "gpu.example.com", 2))
	full.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "true"}}}
	full.Spec.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{Requests: []string{"gpu"}}}
	full.Labels = map[string]string{"a": "b"}
	stripped := queues.StripClaimTemplate(full)
	if stripped.Labels != nil || stripped.Spec.Spec.Devices.Constraints != nil || stripped.Spec.Spec.Devices.Requests[0].Exactly.Selectors != nil {
		t.Errorf("kept what is not charged: %+v", stripped)
	}
	classes := map[string]corev1.ResourceName{"gpu.example.com": "example.com/gpu"}
	spec := &corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{fromTemplate("t")}}
	for _, tpl := range []*resourcev1.ResourceClaimTemplate{full, stripped} {
		d := &queues.PodDefaults{Config: &queues.Config{DeviceClasses: classes}, ClaimTemplates: map[string]*resourcev1.ResourceClaimTemplate{"t": tpl}}
		if got, why := d.ClaimRequests(spec); why != "" || got["example.com/gpu"] != 2 {
			t.Errorf("charged %v (%s)", got, why)
		}
	}
}
