package queues

import schedulingv1 "k8s.io/api/scheduling/v1"

// DefaultWorkloadPriorityClass is the WorkloadPriorityClass a workload
// that names none is given at creation, when the config has one of that
// name: Kueue's WorkloadPriorityClassDefaulting.
const DefaultWorkloadPriorityClass = "default"

// Priority resolves a workload's priority as Kueue does: its
// WorkloadPriorityClass (workloadClass, its label), else the
// PriorityClass its pod templates name (podClass), else the cluster's
// globalDefault PriorityClass, else 0. podClasses maps each PriorityClass
// name to its value, and "" to the value of the globalDefault one
// (PodPriorities). cfg may be nil.
func (c *Config) Priority(workloadClass, podClass string, podClasses map[string]int32) int32 {
	if workloadClass != "" && c != nil {
		if v, ok := c.PriorityClasses[workloadClass]; ok {
			return v
		}
	}
	return podClasses[podClass]
}

// PodPriorities maps each PriorityClass name to its value, and "", the
// priorityClassName of a pod template that names none, to the value of
// the globalDefault PriorityClass: the lowest, when a race has made more
// than one, as Kueue picks.
func PodPriorities(pcs []schedulingv1.PriorityClass) map[string]int32 {
	out := make(map[string]int32, len(pcs)+1)
	for i := range pcs {
		out[pcs[i].Name] = pcs[i].Value
		if pcs[i].GlobalDefault {
			if v, ok := out[""]; !ok || pcs[i].Value < v {
				out[""] = pcs[i].Value
			}
		}
	}
	return out
}
