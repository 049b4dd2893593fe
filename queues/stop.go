package queues

import "fmt"

// The stopPolicy values of a ClusterQueue or LocalQueue, as in Kueue.
const (
	// StopHold stops new admissions; admitted workloads run on.
	StopHold = "Hold"
	// StopHoldAndDrain stops new admissions and evicts the admitted
	// workloads, which queue again (held) until the policy is None.
	StopHoldAndDrain = "HoldAndDrain"
)

// Kueue's eviction reasons for a stopped queue, the prefix of the
// message of an Evicted Event.
const (
	ReasonClusterQueueStopped = "ClusterQueueStopped"
	ReasonLocalQueueStopped   = "LocalQueueStopped"
)

// Stop is what stops a workload: its ClusterQueue's or its LocalQueue's
// stopPolicy. The zero Stop stops nothing.
type Stop struct {
	// Policy is Hold or HoldAndDrain; "" when nothing stops it.
	Policy string
	// Reason is ReasonClusterQueueStopped or ReasonLocalQueueStopped.
	Reason string
	// Queue names the stopped queue: a ClusterQueue, or a LocalQueue as
	// namespace/name.
	Queue string
}

// Stopped says whether the workload may not be admitted.
func (s Stop) Stopped() bool { return s.Policy != "" }

// Drains says whether an admitted workload is to be evicted.
func (s Stop) Drains() bool { return s.Policy == StopHoldAndDrain }

// what names the stopped queue for a message.
func (s Stop) what() string {
	if s.Reason == ReasonLocalQueueStopped {
		return "LocalQueue " + s.Queue
	}
	return "ClusterQueue " + s.Queue
}

// Held is the Pending verdict of a workload its queue stops.
func (s Stop) Held() Verdict {
	return waitf("held", "%s is on hold (stopPolicy %s)", s.what(), s.Policy)
}

// EvictionMessage is the message of the Evicted Event of a workload a
// HoldAndDrain policy evicts.
func (s Stop) EvictionMessage() string {
	return fmt.Sprintf("%s: the %s is stopped (stopPolicy %s); requeued, admitted again once its stopPolicy is None", s.Reason, s.what(), s.Policy)
}

// StopOf says whether w's queues stop it: its ClusterQueue's stopPolicy,
// else that of the LocalQueue its kueue.x-k8s.io/queue-name label names.
// A drain wins over a hold. Only LocalQueue documents have a stopPolicy:
// a workload queued through its namespace's tally.dev/cluster-queue
// annotation, with no queue-name label, answers to its ClusterQueue's
// alone.
func (c *Config) StopOf(w *Workload) Stop {
	var st Stop
	if cq := c.ClusterQueues[w.Queue]; cq != nil && cq.StopPolicy != defaultStopPolicy && cq.StopPolicy != "" {
		st = Stop{Policy: cq.StopPolicy, Reason: ReasonClusterQueueStopped, Queue: cq.Name}
	}
	if st.Drains() || w.LocalQueue == "" || len(c.LocalQueueStops) == 0 {
		return st
	}
	key := w.Namespace + "/" + w.LocalQueue
	if p := c.LocalQueueStops[key]; p != "" && (!st.Stopped() || p == StopHoldAndDrain) {
		st = Stop{Policy: p, Reason: ReasonLocalQueueStopped, Queue: key}
	}
	return st
}

// Drains says whether some queue of the config evicts its admitted
// workloads (HoldAndDrain). Every pass asks.
func (c *Config) Drains() bool { return c.index().drains }

func (c *Config) drains() bool {
	for _, cq := range c.ClusterQueues {
		if cq.StopPolicy == StopHoldAndDrain {
			return true
		}
	}
	for _, p := range c.LocalQueueStops {
		if p == StopHoldAndDrain {
			return true
		}
	}
	return false
}

// Drain picks, of the admitted workloads, those their queues' stopPolicy
// HoldAndDrain evicts, each with what stops it.
func (c *Config) Drain(admitted []*Workload) ([]*Workload, []Stop) {
	var out []*Workload
	var why []Stop
	for _, w := range admitted {
		if st := c.StopOf(w); st.Drains() {
			out, why = append(out, w), append(why, st)
		}
	}
	return out, why
}
