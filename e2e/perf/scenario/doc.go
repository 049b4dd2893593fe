// Package scenario describes a benchmark: cohorts of ClusterQueues with
// their quota and preemption policies, and classes of Jobs that arrive at
// fixed intervals. It expands a scenario into its Jobs and their nominal
// arrival times, renders the tally config documents that set it up, and
// computes the statistics (wall time, usage, time to admission) of a run
// from per-Job outcomes, so that a measured run and a simulated one are
// summarised by the same code.
//
// It is pure: no API server, no clock. It may import the standard library,
// k8s.io/apimachinery's resource quantities and sigs.k8s.io/yaml; the
// runner, the ideal simulator and the bench command import it. Its tests
// check the rendered config with tally's own parser.
package scenario
