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
// A floor run (Options.Floor) keeps all of that but holds tally's leader
// lease, so tally serves its webhooks and its ledger never runs, and
// admits each Job with one patch, as tally's user, when the ideal
// scheduler first admits it (ideal.Online, fed each Job as its create
// returns): the best any scheduler can do on this API server. The held
// floor (Options.HeldFloor) replays ideal.NewHeldOnline instead, which
// frees a Job's quota only when its completion is written: the best a
// scheduler that keeps to quota can do.
//
// The summary puts the run next to the ideal scheduler's outcome, with
// nominal and with the actually recorded creation times, and writes it as
// .bench/<scenario>.summary.yaml.
//
// For a comparison with Kueue, it also writes a scenario as the generator
// config of Kueue's own scheduler-performance runner, runs that runner
// with minimalkueue (built from sigs.k8s.io/kueue by
// e2e/toolchain/build.sh), reads what it reports and prints it beside
// tally's summary.
//
// It speaks tally's user-facing contract only (its command line, the
// ConfigMap, labels and annotations), so the names it uses are spelled out
// here. It may import the scenario, ideal and e2e/framework packages, the
// Kubernetes API types and client-go, envtest (and controller-runtime's
// log, which it writes to, with logr), sigs.k8s.io/yaml and the
// standard library; cmd/bench imports it.
package perf
