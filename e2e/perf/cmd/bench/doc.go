// Command bench runs one benchmark scenario against tally and prints how
// it compares with an ideal zero-latency scheduler and with the replay
// reference: the same run with tally's ledger replaced by a replay of the
// ideal scheduler's decisions (a reference, not a lower bound). `make
// bench` runs it.
//
//	bench -scenario bench/baseline.yaml -out .bench [-mode tally|replay|both] [-held-replay]
//
// -held-replay makes the replay reference one that keeps to quota: the
// ideal scheduler without preemption, holding each Job's quota until its
// completion is written. -mode floor and -held-floor, the former names,
// are read as -mode replay and -held-replay.
//
// It writes .bench/<scenario>.summary.yaml and .bench/<scenario>.jobs.csv
// (the replay reference's as <scenario>.replay.*), and keeps the run's
// files (tally's log, the API server's audit log of tally's requests) in
// .bench/<scenario>/ and .bench/<scenario>.replay/.
//
// With -kueue DIR it compares tally with Kueue's scheduler-performance
// runner and minimalkueue from DIR (the toolchain's kueue-perf) instead:
// -rounds times, in turn, tally, tally at minimalkueue's client budget,
// minimalkueue and minimalkueue-qps500 (at tally's budget), each on an
// API server of its own started alike. It prints the medians and
// spreads and, when the scenario is Kueue's own (its kueueConfig names
// Kueue's config, and it is that config's work), the verdict of that
// config's rangespec.yaml on Kueue's runs, and writes
// .bench/<scenario>.compare.yaml; each run's files are in
// .bench/<scenario>.compare.<round>.<contender>/. `make bench-kueue` runs
// it.
//
// It may import the perf, ideal and scenario packages and the standard
// library.
package main
