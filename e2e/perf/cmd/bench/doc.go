// Command bench runs one benchmark scenario against tally and prints how
// it compares with an ideal zero-latency scheduler and with the floor: the
// same run with tally's ledger replaced by a replay of the ideal
// scheduler's decisions, the best this API server allows. `make bench`
// runs it.
//
//	bench -scenario bench/baseline.yaml -out .bench [-mode tally|floor|both] [-held-floor]
//
// -held-floor makes the floor one that keeps to quota: the ideal scheduler
// without preemption, holding each Job's quota until its completion is
// written.
//
// It writes .bench/<scenario>.summary.yaml and .bench/<scenario>.jobs.csv
// (the floor's as <scenario>.floor.*), and keeps the run's files (tally's
// log, the API server's audit log of tally's requests) in
// .bench/<scenario>/ and .bench/<scenario>.floor/.
//
// With -kueue DIR it runs Kueue's scheduler-performance runner and
// minimalkueue from DIR (the toolchain's kueue-perf) on the scenario
// instead, keeps their files in .bench/<scenario>.kueue/, and prints
// Kueue's figures beside tally's last .bench/<scenario>.summary.yaml.
// `make bench-kueue` runs both.
//
// It may import the perf, ideal and scenario packages and the standard
// library.
package main
