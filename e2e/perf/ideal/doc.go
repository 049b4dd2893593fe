// Package ideal computes what a zero-latency scheduler would make of a
// benchmark plan: a discrete-event simulation in which every admission,
// preemption and completion takes effect the instant it is decided.
//
// The scheduler it simulates follows the plan's ClusterQueue policies the
// way Kueue does:
//   - each ClusterQueue orders its pending Jobs by priority, then creation
//     time; BestEffortFIFO skips a Job that does not fit for the next one,
//     StrictFIFO waits for its head;
//   - a ClusterQueue may use up to nominal + borrowingLimit, as long as its
//     cohort as a whole stays within the sum of its members' nominal quota;
//   - the heads of a cohort's ClusterQueues are admitted in Kueue's order:
//     those that need not borrow first, then by priority, then creation;
//   - preemption: withinClusterQueue LowerPriority lets a Job evict lower
//     priority Jobs of its own ClusterQueue; reclaimWithinCohort lets a Job
//     that fits within its ClusterQueue's nominal quota evict Jobs of
//     ClusterQueues that borrow (Any: any priority; LowerPriority: lower
//     only). Victims are the borrowing ClusterQueues' Jobs first, then the
//     lowest priority, then the most recently admitted, and a victim whose
//     removal turns out unneeded is kept. An evicted Job queues again and
//     restarts from the beginning when admitted again.
//
// It is pure and deterministic: it may import the standard library and the
// scenario package only.
package ideal
