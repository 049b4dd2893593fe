// Package perf measures tally under load: it runs a benchmark scenario
// against a real kube-apiserver and etcd (envtest) with tally as a real
// process, and compares the outcome with what an ideal zero-latency
// scheduler makes of the same scenario.
//
// The runner creates the scenario's Jobs open-loop, each at its nominal
// time whatever the API latency, watches them, and plays the job
// controller: when tally admits a Job it waits the Job's runtime and marks
// it complete through the status subresource; when tally preempts it, the
// run is cut short and counted. No pods ever exist, so what is measured is
// tally alone. Besides the per-Job times it records tally's CPU time and
// peak memory (from the process), and its API requests (from an audit log
// of the user tally runs as).
//
// A replay run (Options.Replay) keeps all of that but holds tally's leader
// lease, so tally serves its webhooks and its ledger never runs, and
// admits each Job with one patch, as tally's user, when the ideal
// scheduler first admits it (ideal.Online, fed each Job as its create
// returns): a replay reference, not a lower bound, since it holds more
// quota than is free for a moment in every cycle, and a schedule that
// keeps to quota has beaten it. The held replay (Options.HeldReplay)
// replays ideal.NewHeldOnline instead, which frees a Job's quota only
// when its completion is written: a zero-cost scheduler that keeps to
// quota, with the ideal's policy less preemption (not an optimum).
//
// The summary puts the run next to the ideal scheduler's outcome, with
// nominal and with the actually recorded creation times, and writes it as
// .bench/<scenario>.summary.yaml.
//
// For a comparison with Kueue (compare.go, kueuerun.go), it writes a
// scenario as the generator config of Kueue's own scheduler-performance
// runner and runs that runner with minimalkueue (built from
// sigs.k8s.io/kueue by e2e/toolchain/build.sh, as released and with only
// its client budget raised to tally's) against an API server started as
// tally's are, with minimalkueue as a process of its own, so that its CPU,
// memory and requests are measured as tally's are, and a watch of the
// runner's own on the Workloads times their admissions as the tracker
// times the Jobs'. Runs of tally and of Kueue are taken in turn, and the
// comparison prints the medians and spreads of each.
//
// With Options.Pods the runner plays the Jobs' pods too (one per run),
// so tally's pod gate is in the run.
//
// A scenario with a topology (scenario.Topology) has the runner make its
// nodes before tally starts, Ready and with their allocatable, as Kueue's
// runner makes them in its own runs, and its Jobs ask for their
// placements with Kueue's pod-template annotations; Result.Placed counts
// the admissions seen with tally's placement. The ideal scheduler, the
// replay reference and tally's core know quota only: the right reference
// where the nodes hold far more than the quota (bench/tas.yaml: 61,440
// cpu of nodes, 600 of quota), so that quota alone decides when a Job
// starts and the topology only where its pods go.
//
// It speaks tally's user-facing contract only (its command line, the
// ConfigMap, labels and annotations), so the names it uses are spelled out
// here. It may import the scenario, ideal and e2e/framework packages, the
// Kubernetes API types and client-go, envtest (and controller-runtime's
// log, which it writes to, with logr), sigs.k8s.io/yaml, pprof's
// profile reader (github.com/google/pprof/profile) and the standard
// library; cmd/bench imports it.
package perf
