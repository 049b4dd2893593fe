// Command bench runs one benchmark scenario against tally and prints how
// it compares with an ideal zero-latency scheduler. `make bench` runs it.
//
//	bench -scenario bench/baseline.yaml -out .bench
//
// It writes .bench/<scenario>.summary.yaml and .bench/<scenario>.jobs.csv,
// and keeps the run's files (tally's log, the API server's audit log of
// tally's requests) in .bench/<scenario>/.
//
// It may import the perf, ideal and scenario packages and the standard
// library.
package main
