package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"tally.dev/tally/e2e/perf"
	"tally.dev/tally/e2e/perf/ideal"
	"tally.dev/tally/e2e/perf/scenario"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	os.Exit(run())
}

func run() int {
	var (
		path      = flag.String("scenario", "bench/baseline.yaml", "The scenario file.")
		out       = flag.String("out", ".bench", "Where the summary and the run's files go.")
		assets    = flag.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "Directory holding etcd and kube-apiserver.")
		bin       = flag.String("tally", os.Getenv("TALLY_BIN"), "The tally binary.")
		timeout   = flag.Duration("timeout", 0, "Bound on the run; 0: the scenario's timeout, else 3× the ideal makespan plus 2m.")
		workers   = flag.Int("workers", 0, "Create workers; 0: enough for the largest burst of arrivals.")
		profile   = flag.Bool("profile", false, "Take a CPU profile of tally over the run; tally must serve pprof (it is given --pprof-bind-address).")
		tallyArgs stringList
	)
	flag.Var(&tallyArgs, "tally-arg", "An extra argument for `tally serve` (repeatable).")
	flag.Parse()
	if *assets == "" || *bin == "" {
		fmt.Fprintln(os.Stderr, "bench: set KUBEBUILDER_ASSETS and TALLY_BIN (or -assets and -tally); `make bench` does")
		return 2
	}
	sc, err := scenario.Load(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	plan := sc.Expand()
	outcomes, err := ideal.Simulate(plan, plan.Arrivals())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	bound := scenario.Compute(plan, outcomes)
	if *timeout == 0 {
		*timeout = sc.Timeout.Duration
	}
	if *timeout == 0 {
		*timeout = 3*bound.Wall + 2*time.Minute
	}
	fmt.Printf("bench %s: %d Jobs in %d ClusterQueues; the ideal scheduler needs %.1fs (%.1fs of work for the quota)\n",
		sc.Name, len(plan.Jobs), len(plan.Queues), bound.Wall.Seconds(), plan.WorkSeconds()/(float64(plan.NominalMilli())/1000))

	dir := filepath.Join(*out, sc.Name)
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	opts := perf.Options{
		Plan: plan, Assets: *assets, TallyBin: *bin, Dir: dir, TallyArgs: tallyArgs,
		Timeout: *timeout, Workers: *workers, Progress: os.Stdout,
	}
	profilePrefix := filepath.Join(*out, sc.Name+".tally.cpu")
	var profiles []string
	if *profile {
		addr, err := freeAddr()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		opts.TallyArgs = append(opts.TallyArgs, "--pprof-bind-address", addr)
		opts.During = func(ctx context.Context) error {
			var err error
			profiles, err = perf.CPUProfiles(ctx, "http://"+addr, 10, profilePrefix)
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, runErr := perf.Run(ctx, opts)
	if res == nil {
		fmt.Fprintln(os.Stderr, "bench:", runErr)
		return 1
	}
	sum, err := perf.Summarize(plan, res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", errors.Join(runErr, err))
		return 1
	}
	fmt.Println()
	if err := sum.Table(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	summaryPath, err := sum.Write(*out)
	if err == nil {
		err = perf.WriteJobs(filepath.Join(*out, sc.Name+".jobs.csv"), plan, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Printf("\nsummary: %s; per-Job times: %s; tally's log: %s\n", summaryPath, filepath.Join(*out, sc.Name+".jobs.csv"), filepath.Join(dir, "tally.log"))
	if len(profiles) > 0 {
		fmt.Printf("tally CPU profiles, 10s each: go tool pprof -top %s %s\n", *bin, strings.Join(profiles, " "))
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "bench: the run did not complete:", runErr)
		return 1
	}
	return 0
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
