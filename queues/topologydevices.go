package queues

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"tally.dev/tally/flavors"
)

// Devices of Dynamic Resource Allocation count in a topology's domains.
// A node has, of each resource that resources.deviceClassMappings maps a
// DeviceClass to, the devices a driver publishes for it (ResourceSlices
// whose spec.nodeName is the node, of their pool's current generation)
// that a DeviceClass mapped to the resource selects, less those that a
// ResourceClaim has been allocated. Whether a class selects a device is
// its DeviceSelector's answer (package deviceclass evaluates the class's
// CEL selectors as kube-scheduler does); a class whose selectors do not
// compile, or fail on a device, selects nothing (or not that device),
// and says so (DeviceClassProblems).
//
// What tally leaves out: devices of slices that are not bound to one
// node (spec.nodeSelector, allNodes, perDeviceNodeSelection); device
// taints; a claim's own selectors (a device of the class counts, however
// the pods' templates narrow it); counters and capacities shared by
// partitionable devices (a device counts as one, taken by any claim
// allocated it). A device that classes mapped to two resources select
// counts in each. A claim made by the scheduler for an extended
// resource request (resourcev1.ExtendedResourceClaimAnnotation) is not
// counted: its pod's request already is.

// DeviceID names a device as an allocation result does: its driver,
// pool and name.
type DeviceID struct {
	Driver, Pool, Device string
}

// nodeDevices keeps the devices of the nodes, per mapped resource. Its
// invariants:
//
//   - devices holds exactly the devices of the slices told of that are
//     bound to a node and of their pool's current generation (the
//     highest told of), a device that two such slices name from the
//     first by name;
//   - each device's resources are the mapped resources of the classes
//     whose selectors select it;
//   - free is, by node and resource, the devices there that count as it
//     and that no claim told of was allocated.
//
// A slice's change costs its devices times the mapped classes (its
// pool's, when it changes the pool's generation); a class's, every
// device once; a claim's, its devices.
type nodeDevices struct {
	mapped  map[string]corev1.ResourceName
	classes map[string]*deviceClass
	slices  map[string]*deviceSlice
	pools   map[poolID]map[string]*deviceSlice
	devices map[DeviceID]*nodeDevice
	taken   map[DeviceID]int32
	claims  map[string][]DeviceID
	free    map[string]flavors.Resources
}

type poolID struct{ driver, pool string }

// deviceSlice is what is read of a ResourceSlice bound to a node.
type deviceSlice struct {
	name, node string
	pool       poolID
	generation int64
	devices    []resourcev1.Device
	active     bool // of its pool's current generation
}

// nodeDevice is a device of a current slice: its node, its slice, the
// device as published, the mapped classes that select it and the resources it
// counts as.
type nodeDevice struct {
	node      string
	slice     string
	device    *resourcev1.Device
	matched   map[string]bool
	resources []corev1.ResourceName
}

// DeviceSelector says which devices a DeviceClass selects
// (deviceclass.Selector evaluates its CEL selectors).
type DeviceSelector interface {
	// Selects says whether the class selects device d of driver, or
	// why it cannot tell.
	Selects(driver string, d *resourcev1.Device) (bool, error)
	// Fault is why the class selects nothing at all ("" for none).
	Fault() string
}

// deviceClass is a DeviceClass's selector and the devices it failed on.
type deviceClass struct {
	sel    DeviceSelector
	failed map[DeviceID]string
}

func newNodeDevices() *nodeDevices {
	return &nodeDevices{classes: map[string]*deviceClass{}, slices: map[string]*deviceSlice{}, pools: map[poolID]map[string]*deviceSlice{},
		devices: map[DeviceID]*nodeDevice{}, taken: map[DeviceID]int32{}, claims: map[string][]DeviceID{}, free: map[string]flavors.Resources{}}
}

// changes collects the nodes whose free devices changed.
type changes map[string]struct{}

func (c changes) note(node string) { c[node] = struct{}{} }

// setMapped makes mapped the config's mappings, and evaluates every
// device again when they changed.
func (d *nodeDevices) setMapped(mapped map[string]corev1.ResourceName, ch changes) {
	if maps.Equal(d.mapped, mapped) {
		return
	}
	d.mapped = mapped
	for id, dev := range d.devices {
		d.count(dev, id, -1, ch)
		dev.matched = map[string]bool{}
		for class := range mapped {
			if d.selects(class, id, dev) {
				dev.matched[class] = true
			}
		}
		dev.resources = d.resourcesOf(dev.matched)
		d.count(dev, id, +1, ch)
	}
}

// setSlice notes slice s as it is now; nil s, with name, that it is
// gone.
func (d *nodeDevices) setSlice(name string, s *resourcev1.ResourceSlice, ch changes) {
	old := d.slices[name]
	if old != nil && s != nil && s.Spec.NodeName != nil && old.node == *s.Spec.NodeName && old.pool == (poolID{s.Spec.Driver, s.Spec.Pool.Name}) &&
		old.generation == s.Spec.Pool.Generation && reflect.DeepEqual(old.devices, s.Spec.Devices) {
		return // as it was
	}
	if old != nil {
		delete(d.slices, name)
		pool := d.pools[old.pool]
		delete(pool, name)
		if old.active {
			d.deactivate(old, ch)
		}
		if len(pool) == 0 {
			delete(d.pools, old.pool)
		} else {
			d.settle(old.pool, ch)
		}
	}
	if s == nil || s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
		return
	}
	ds := &deviceSlice{name: name, node: *s.Spec.NodeName, pool: poolID{s.Spec.Driver, s.Spec.Pool.Name}, generation: s.Spec.Pool.Generation, devices: s.Spec.Devices}
	d.slices[name] = ds
	if d.pools[ds.pool] == nil {
		d.pools[ds.pool] = map[string]*deviceSlice{}
	}
	d.pools[ds.pool][name] = ds
	d.settle(ds.pool, ch)
}

// settle makes active exactly the slices of pool of its highest
// generation.
func (d *nodeDevices) settle(pool poolID, ch changes) {
	var current int64
	for _, s := range d.pools[pool] {
		current = max(current, s.generation)
	}
	for _, s := range d.pools[pool] {
		if s.active && s.generation != current {
			d.deactivate(s, ch)
		}
	}
	for _, s := range d.pools[pool] {
		if !s.active && s.generation == current {
			d.activate(s, ch)
		}
	}
}

func (d *nodeDevices) activate(s *deviceSlice, ch changes) {
	s.active = true
	for i := range s.devices {
		d.add(s, &s.devices[i], ch)
	}
}

func (d *nodeDevices) deactivate(s *deviceSlice, ch changes) {
	s.active = false
	for i := range s.devices {
		id := DeviceID{s.pool.driver, s.pool.pool, s.devices[i].Name}
		dev := d.devices[id]
		if dev == nil || dev.slice != s.name {
			continue
		}
		d.drop(id, dev, ch)
		// Another current slice of the pool that names it too (a pool
		// the scheduler refuses) has it now.
		var from *deviceSlice
		var dv *resourcev1.Device
		for _, other := range d.pools[s.pool] {
			if !other.active || (from != nil && other.name > from.name) {
				continue
			}
			for j := range other.devices {
				if other.devices[j].Name == id.Device {
					from, dv = other, &other.devices[j]
				}
			}
		}
		if from != nil {
			d.add(from, dv, ch)
		}
	}
}

// add counts device dv of slice s, unless a slice of a smaller name has
// a device of its name: of two slices of a pool's generation that name
// one device, the first by name counts it, whatever order they come in.
func (d *nodeDevices) add(s *deviceSlice, dv *resourcev1.Device, ch changes) {
	id := DeviceID{s.pool.driver, s.pool.pool, dv.Name}
	if old := d.devices[id]; old != nil {
		if old.slice < s.name {
			return
		}
		d.drop(id, old, ch)
	}
	dev := &nodeDevice{node: s.node, slice: s.name, device: dv, matched: map[string]bool{}}
	for class := range d.mapped {
		if d.selects(class, id, dev) {
			dev.matched[class] = true
		}
	}
	dev.resources = d.resourcesOf(dev.matched)
	d.devices[id] = dev
	d.count(dev, id, +1, ch)
}

// drop stops counting device id.
func (d *nodeDevices) drop(id DeviceID, dev *nodeDevice, ch changes) {
	d.count(dev, id, -1, ch)
	delete(d.devices, id)
	for _, c := range d.classes {
		delete(c.failed, id)
	}
}

// setClass notes that DeviceClass name selects as sel does (nil: it is
// gone). A mapped class's devices are evaluated again.
func (d *nodeDevices) setClass(name string, sel DeviceSelector, ch changes) {
	if sel == nil {
		delete(d.classes, name)
	} else {
		d.classes[name] = &deviceClass{sel: sel}
	}
	if _, ok := d.mapped[name]; !ok {
		return
	}
	for id, dev := range d.devices {
		if sel := d.selects(name, id, dev); sel != dev.matched[name] {
			d.count(dev, id, -1, ch)
			if sel {
				dev.matched[name] = true
			} else {
				delete(dev.matched, name)
			}
			dev.resources = d.resourcesOf(dev.matched)
			d.count(dev, id, +1, ch)
		}
	}
}

// setClaim notes that claim key is allocated devices (none: it is not,
// or gone).
func (d *nodeDevices) setClaim(key string, devices []DeviceID, ch changes) {
	old := d.claims[key]
	if slices.Equal(old, devices) {
		return
	}
	for _, id := range old {
		if d.taken[id]--; d.taken[id] <= 0 {
			delete(d.taken, id)
			if dev := d.devices[id]; dev != nil {
				d.count(dev, id, +1, ch)
			}
		}
	}
	delete(d.claims, key)
	if len(devices) == 0 {
		return
	}
	d.claims[key] = slices.Clone(devices)
	for _, id := range devices {
		if dev := d.devices[id]; dev != nil && d.taken[id] == 0 {
			d.count(dev, id, -1, ch)
		}
		d.taken[id]++
	}
}

// count adds (sign +1) or takes away (-1) device id from its node's
// free devices, unless a claim has it.
func (d *nodeDevices) count(dev *nodeDevice, id DeviceID, sign int, ch changes) {
	if d.taken[id] > 0 || len(dev.resources) == 0 {
		return
	}
	free := d.free[dev.node]
	if free == nil {
		free = flavors.Resources{}
		d.free[dev.node] = free
	}
	for _, r := range dev.resources {
		one := flavors.FromQuantity(r, *resource.NewQuantity(1, resource.DecimalSI))
		if sign > 0 {
			free[r] = free[r].Add(one)
		} else if free[r] = free[r].Sub(one); free[r] == 0 {
			delete(free, r)
		}
	}
	if len(free) == 0 {
		delete(d.free, dev.node)
	}
	ch.note(dev.node)
}

// resourcesOf is the mapped resources of classes, sorted.
func (d *nodeDevices) resourcesOf(classes map[string]bool) []corev1.ResourceName {
	var out []corev1.ResourceName
	for class := range classes {
		if r, ok := d.mapped[class]; ok && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// selects says whether class selects device id, noting on the class why
// not when its selector cannot say.
func (d *nodeDevices) selects(class string, id DeviceID, dev *nodeDevice) bool {
	c := d.classes[class]
	if c == nil {
		return false // not told of (yet): it selects nothing
	}
	delete(c.failed, id)
	ok, err := c.sel.Selects(id.Driver, dev.device)
	if err != nil {
		if c.failed == nil {
			c.failed = map[DeviceID]string{}
		}
		c.failed[id] = fmt.Sprintf("%v, on device %s of pool %s (driver %s)", err, id.Device, id.Pool, id.Driver)
		return false
	}
	return ok
}

// DeviceClassProblem says why a mapped DeviceClass's devices are not
// all counted in the topologies' domains.
type DeviceClassProblem struct {
	Class    string
	Resource corev1.ResourceName
	Why      string
}

// Message says what p means, for the Warning Event of ledger's
// DeviceClassNotCounted and tally explain.
func (p DeviceClassProblem) Message() string {
	return fmt.Sprintf("DeviceClass %s (mapped to %s): %s; the devices it cannot select so are not counted in the topologies' domains, and workloads that claim them are not placed on them",
		p.Class, p.Resource, p.Why)
}

// problems is, by class name, why each mapped class told of counts none
// or not all of its devices.
func (d *nodeDevices) problems() []DeviceClassProblem {
	var out []DeviceClassProblem
	for _, name := range slices.Sorted(maps.Keys(d.mapped)) {
		c := d.classes[name]
		if c == nil {
			continue
		}
		why := c.sel.Fault()
		if why == "" && len(c.failed) > 0 {
			ids := slices.SortedFunc(maps.Keys(c.failed), func(a, b DeviceID) int {
				return strings.Compare(a.Driver+"\x00"+a.Pool+"\x00"+a.Device, b.Driver+"\x00"+b.Pool+"\x00"+b.Device)
			})
			why = c.failed[ids[0]]
			if len(ids) > 1 {
				why += fmt.Sprintf(" (and on %d other devices)", len(ids)-1)
			}
		}
		if why != "" {
			out = append(out, DeviceClassProblem{Class: name, Resource: d.mapped[name], Why: why})
		}
	}
	return out
}

// ClaimDevices is the devices claim c holds, as the domains count them:
// those of its allocation, but those it has with admin access (which
// take no device from others). A claim the scheduler made for a pod's
// extended resource request holds none here: the pod's request counts.
func ClaimDevices(c *resourcev1.ResourceClaim) []DeviceID {
	if c.Status.Allocation == nil || c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] == "true" {
		return nil
	}
	var out []DeviceID
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		out = append(out, DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device})
	}
	return out
}

// StripResourceSlice keeps of a ResourceSlice what the domains read: its
// name, driver, pool, node and its devices' names, attributes and
// capacities (what a class's selectors read).
func StripResourceSlice(s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
	out := &resourcev1.ResourceSlice{}
	out.Name, out.UID, out.ResourceVersion = s.Name, s.UID, s.ResourceVersion
	out.Spec = resourcev1.ResourceSliceSpec{Driver: s.Spec.Driver, Pool: s.Spec.Pool, NodeName: s.Spec.NodeName}
	if s.Spec.NodeName == nil {
		return out
	}
	out.Spec.Devices = make([]resourcev1.Device, len(s.Spec.Devices))
	for i, dv := range s.Spec.Devices {
		out.Spec.Devices[i] = resourcev1.Device{Name: dv.Name, Attributes: dv.Attributes, Capacity: dv.Capacity, AllowMultipleAllocations: dv.AllowMultipleAllocations}
	}
	return out
}

// StripDeviceClass keeps of a DeviceClass its name and selectors.
func StripDeviceClass(c *resourcev1.DeviceClass) *resourcev1.DeviceClass {
	out := &resourcev1.DeviceClass{}
	out.Name, out.UID, out.ResourceVersion = c.Name, c.UID, c.ResourceVersion
	out.Spec.Selectors = c.Spec.Selectors
	return out
}

// StripResourceClaim keeps of a ResourceClaim what ClaimDevices reads.
func StripResourceClaim(c *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	out := &resourcev1.ResourceClaim{}
	out.Name, out.Namespace, out.UID, out.ResourceVersion = c.Name, c.Namespace, c.UID, c.ResourceVersion
	if v, ok := c.Annotations[resourcev1.ExtendedResourceClaimAnnotation]; ok {
		out.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: v}
	}
	if a := c.Status.Allocation; a != nil {
		results := make([]resourcev1.DeviceRequestAllocationResult, len(a.Devices.Results))
		for i, r := range a.Devices.Results {
			results[i] = resourcev1.DeviceRequestAllocationResult{Driver: r.Driver, Pool: r.Pool, Device: r.Device, AdminAccess: r.AdminAccess}
		}
		out.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
	}
	return out
}

// SetResourceSlice notes ResourceSlice s as it is now, and returns the
// ClusterQueues whose flavors' trees it changed.
func (f *FlavorDomains) SetResourceSlice(s *resourcev1.ResourceSlice) []string {
	ch := changes{}
	f.devices.setSlice(s.Name, s, ch)
	return f.replace(ch)
}

// RemoveResourceSlice forgets ResourceSlice name, and returns the
// ClusterQueues whose flavors' trees it changed.
func (f *FlavorDomains) RemoveResourceSlice(name string) []string {
	ch := changes{}
	f.devices.setSlice(name, nil, ch)
	return f.replace(ch)
}

// SetDeviceClass notes that DeviceClass name selects the devices sel
// selects, and returns the ClusterQueues whose flavors' trees it
// changed.
func (f *FlavorDomains) SetDeviceClass(name string, sel DeviceSelector) []string {
	ch := changes{}
	f.devices.setClass(name, sel, ch)
	return f.replace(ch)
}

// RemoveDeviceClass forgets DeviceClass name, and returns the
// ClusterQueues whose flavors' trees it changed.
func (f *FlavorDomains) RemoveDeviceClass(name string) []string {
	ch := changes{}
	f.devices.setClass(name, nil, ch)
	return f.replace(ch)
}

// SetClaim notes that ResourceClaim key (namespace/name) holds devices
// (ClaimDevices; none when it is not allocated, or gone), and returns
// the ClusterQueues whose flavors' trees it changed.
func (f *FlavorDomains) SetClaim(key string, devices []DeviceID) []string {
	ch := changes{}
	f.devices.setClaim(key, devices, ch)
	return f.replace(ch)
}

// DeviceClassProblems says, of each mapped DeviceClass whose selectors
// cannot be evaluated (on some devices, or at all), why: its devices
// (those) are not counted in the domains.
func (f *FlavorDomains) DeviceClassProblems() []DeviceClassProblem {
	return f.devices.problems()
}

// replace puts the nodes of ch in the trees again, with their devices
// as they are now.
func (f *FlavorDomains) replace(ch changes) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(ch)) {
		if n := f.nodes[name]; n != nil && n.labels != nil {
			for _, q := range f.place(name, n) {
				if !slices.Contains(out, q) {
					out = append(out, q)
				}
			}
		}
	}
	return out
}
