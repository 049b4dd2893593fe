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
		mode      = flag.String("mode", "both", "What to run: tally; floor (tally's webhook, the ideal scheduler's decisions replayed in place of its ledger: the best this API server allows); or both, tally then the floor, side by side.")
		explain   = flag.Duration("explain-every", 0, "Ask `tally explain` this often during tally's run about a few waiting Jobs, and report how far its start estimates were from the actual starts; 0: never.")
		held      = flag.Bool("held-floor", false, "Make the floor the held floor: the ideal scheduler without preemption, holding each Job's quota until the runner's completion write for it returns, so that it never takes more quota than is free on the API server.")
		policy    = flag.Bool("creation-policy", false, "Replace tally's Job webhook with a MutatingAdmissionPolicy that makes the same changes at creation, to measure what the webhook round trip costs.")
		profile   = flag.Bool("profile", false, "Take CPU and allocation profiles of tally (it is given --pprof-bind-address; not in a floor run) and of the API server over the run.")
		apiLog    = flag.Int("apiserver-v", 0, "Keep the API server's log at this verbosity in the run's folder (apiserver.log); 0: no log. At 1 it names each Job watch it cuts off for falling behind.")
		kueue     = flag.String("kueue", "", "Run Kueue's scheduler-performance runner and minimalkueue from this folder (the toolchain's kueue-perf) instead of tally, and print them beside tally's last summary.")
		tallyArgs stringList
		tallyEnv  stringList
	)
	flag.Var(&tallyArgs, "tally-arg", "An extra argument for `tally serve` (repeatable).")
	flag.Var(&tallyEnv, "tally-env", "KEY=VALUE added to tally's environment only, such as GOMAXPROCS=1 (repeatable); the API server and the runner keep theirs.")
	flag.Parse()
	if *mode != "tally" && *mode != "floor" && *mode != "both" {
		fmt.Fprintf(os.Stderr, "bench: -mode %q: want tally, floor or both\n", *mode)
		return 2
	}
	for _, kv := range tallyEnv {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			fmt.Fprintf(os.Stderr, "bench: -tally-env %q: want KEY=VALUE\n", kv)
			return 2
		}
	}
	if *assets == "" || *bin == "" && *kueue == "" {
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *kueue != "" {
		if *timeout == 0 {
			// Kueue's runner records for 10 minutes by default, and
			// needs 7 to 8 for the baseline on 2 cores: leave room for
			// a loaded machine.
			*timeout = max(15*time.Minute, 10*bound.Wall+2*time.Minute)
		}
		return runKueue(ctx, sc, plan, bound, *kueue, *assets, *out, *timeout)
	}
	if *timeout == 0 {
		*timeout = 3*bound.Wall + 2*time.Minute
	}
	fmt.Printf("bench %s: %d Jobs in %d ClusterQueues; the ideal scheduler needs %.1fs (%.1fs of work for the quota)\n",
		sc.Name, len(plan.Jobs), len(plan.Queues), bound.Wall.Seconds(), plan.WorkSeconds()/(float64(plan.NominalMilli())/1000))

	// measure runs the plan once, against tally or as the floor, and
	// writes the per-Job times.
	measure := func(floor bool) (*perf.Summary, error) {
		name := sc.Name
		if floor {
			name += ".floor"
			if *held {
				fmt.Printf("\nthe held floor: tally's webhook, the decisions of the ideal scheduler without preemption, fed the completions, replayed as patches\n")
			} else {
				fmt.Printf("\nthe floor: tally's webhook, the ideal scheduler's decisions replayed as patches\n")
			}
		}
		dir := filepath.Join(*out, name)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		opts := perf.Options{
			Plan: plan, Assets: *assets, TallyBin: *bin, Dir: dir, TallyArgs: tallyArgs, TallyEnv: tallyEnv, Floor: floor, HeldFloor: floor && *held, ExplainEvery: *explain, CreationPolicy: *policy, APIServerLogLevel: *apiLog,
			Timeout: *timeout, Workers: *workers, Progress: os.Stdout,
		}
		profilePrefix := filepath.Join(*out, name+".tally")
		if *profile {
			opts.APIServerProfile = filepath.Join(*out, name+".apiserver")
		}
		var profiles []string
		if *profile && !floor {
			addr, err := freeAddr()
			if err != nil {
				return nil, err
			}
			opts.TallyArgs = append(opts.TallyArgs, "--pprof-bind-address", addr)
			opts.During = func(ctx context.Context) error {
				var err error
				profiles, err = perf.CPUProfiles(ctx, perf.HTTPFetch("http://"+addr), 10, profilePrefix)
				return err
			}
		}
		res, runErr := perf.Run(ctx, opts)
		if res == nil {
			return nil, runErr
		}
		sum, err := perf.Summarize(plan, res)
		if err != nil {
			return nil, errors.Join(runErr, err)
		}
		jobs := filepath.Join(*out, name+".jobs.csv")
		if err := perf.WriteJobs(jobs, plan, res); err != nil {
			return nil, err
		}
		fmt.Printf("per-Job times: %s; tally's log: %s\n", jobs, filepath.Join(dir, "tally.log"))
		if len(profiles) > 0 {
			fmt.Printf("tally CPU profiles, 10s each: go tool pprof -top %s %s\n", *bin, strings.Join(profiles, " "))
			fmt.Printf("tally's allocations up to the last of them: go tool pprof -sample_index=alloc_space -top %s %s.allocs.pprof\n", *bin, profilePrefix)
		}
		if len(res.APIServerProfiles) > 0 {
			fmt.Printf("the API server's CPU profiles, 10s each: go tool pprof -top %s\n", strings.Join(res.APIServerProfiles, " "))
		}
		if res.ReplayFailures > 0 && runErr == nil {
			runErr = fmt.Errorf("%d of the floor's writes failed", res.ReplayFailures)
		}
		if runErr != nil {
			return sum, fmt.Errorf("the run did not complete: %w", runErr)
		}
		return sum, nil
	}
	var sum, floor *perf.Summary
	var err1, err2 error
	if *mode != "floor" {
		sum, err1 = measure(false)
	}
	if *mode != "tally" && err1 == nil {
		floor, err2 = measure(true)
	}
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if sum == nil {
		sum = floor
	} else if floor != nil {
		sum.SetFloor(floor)
	}
	fmt.Println()
	if err := sum.Table(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	toWrite := []*perf.Summary{sum}
	if floor != nil && floor != sum {
		toWrite = append(toWrite, floor)
	}
	for _, s := range toWrite {
		path, err := s.Write(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Printf("summary: %s\n", path)
	}
	return 0
}

// runKueue runs Kueue's runner on the scenario and prints it beside
// tally's last summary of the same scenario in out, if there is one.
func runKueue(ctx context.Context, sc *scenario.Scenario, plan *scenario.Plan, bound scenario.Stats, tools, assets, out string, timeout time.Duration) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench:", err); return 1 }
	version, err := os.ReadFile(filepath.Join(tools, "VERSION"))
	if err != nil {
		return fail(fmt.Errorf("%w (e2e/toolchain/build.sh DIR kueue-perf builds it)", err))
	}
	gen, err := perf.KueueGenerator(sc)
	if err != nil {
		return fail(err)
	}
	dir := filepath.Join(out, sc.Name+".kueue")
	if err := os.RemoveAll(dir); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	genPath := filepath.Join(dir, "generator.yaml")
	if err := os.WriteFile(genPath, gen, 0o644); err != nil {
		return fail(err)
	}
	// Kueue's own config of the same name, if it has one, should describe
	// the same work.
	if own, err := os.ReadFile(filepath.Join(tools, "configs", sc.Name, "generator.yaml")); err == nil {
		same, err := perf.SameKueueGenerator(gen, own)
		if err != nil {
			return fail(err)
		}
		verdict := "the same work as"
		if !same {
			verdict = "NOT the same work as"
		}
		fmt.Printf("kueue: %s is %s Kueue's configs/%s/generator.yaml\n", genPath, verdict, sc.Name)
	}
	v := strings.TrimSpace(string(version))
	fmt.Printf("kueue: running Kueue %s's scheduler-performance runner with minimalkueue (for up to %s); its files go to %s\n", v, timeout, dir)
	start := time.Now()
	k, err := perf.RunKueue(ctx, perf.KueueOptions{Tools: tools, Assets: assets, Generator: genPath, Dir: dir, Timeout: timeout})
	if err != nil {
		return fail(err)
	}
	fmt.Printf("kueue: done in %.0fs\n\n", time.Since(start).Seconds())
	tallyPath := filepath.Join(out, sc.Name+".summary.yaml")
	tally, err := perf.ReadSummary(tallyPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fail(err)
	default:
		if fi, err := os.Stat(tallyPath); err == nil {
			fmt.Printf("tally: %s, written %s\n", tallyPath, fi.ModTime().UTC().Format(time.RFC3339))
		}
	}
	if err := perf.CompareTable(os.Stdout, plan, bound, tally, k, v); err != nil {
		return fail(err)
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
