package inspect

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/deviceclass"
)

// Devices are what the topologies' domains count of Dynamic Resource
// Allocation: the nodes' ResourceSlices, the DeviceClasses that select
// their devices, and the ResourceClaims allocated some.
type Devices struct {
	Slices  []resourcev1.ResourceSlice
	Classes []resourcev1.DeviceClass
	Claims  []resourcev1.ResourceClaim
}

// ReadDevices lists the Devices when cfg has a topology and maps
// DeviceClasses; nil otherwise, or when any of them cannot be listed.
func ReadDevices(ctx context.Context, c client.Reader, cfg *queues.Config) *Devices {
	if len(cfg.Topologies) == 0 || len(cfg.DeviceClasses) == 0 {
		return nil
	}
	slices, classes, claims := &resourcev1.ResourceSliceList{}, &resourcev1.DeviceClassList{}, &resourcev1.ResourceClaimList{}
	for _, list := range []client.ObjectList{slices, classes, claims} {
		if err := c.List(ctx, list); err != nil {
			return nil
		}
	}
	return &Devices{Slices: slices.Items, Classes: classes.Items, Claims: claims.Items}
}

// tell has f count d's devices; nil d tells nothing.
func (d *Devices) tell(f *queues.FlavorDomains) {
	if d == nil {
		return
	}
	for i := range d.Classes {
		f.SetDeviceClass(d.Classes[i].Name, deviceclass.Compile(&d.Classes[i]))
	}
	for i := range d.Slices {
		f.SetResourceSlice(&d.Slices[i])
	}
	for i := range d.Claims {
		f.SetClaim(d.Claims[i].Namespace+"/"+d.Claims[i].Name, queues.ClaimDevices(&d.Claims[i]))
	}
}
