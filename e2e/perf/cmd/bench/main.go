package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"tally.dev/tally/e2e/framework"
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
		mode      = flag.String("mode", "both", "What to run: tally; replay (the replay reference: tally's webhook, the ideal scheduler's decisions replayed as patches in place of its ledger; a reference, not a lower bound); or both, tally then the replay reference, side by side. floor is read as replay.")
		explain   = flag.Duration("explain-every", 0, "Ask `tally explain` this often during tally's run about a few waiting Jobs, and report how far its start estimates were from the actual starts; 0: never.")
		heldOld   = flag.Bool("held-floor", false, "The former name of -held-replay.")
		held      = flag.Bool("held-replay", false, "Make the replay reference the held replay: the ideal scheduler without preemption, holding each Job's quota until the runner's completion write for it returns, so that it never takes more quota than is free on the API server.")
		policy    = flag.Bool("creation-policy", false, "Replace tally's Job webhook with a MutatingAdmissionPolicy that makes the same changes at creation, to measure what the webhook round trip costs.")
		pods      = flag.Bool("pods", false, "Play the Jobs' pods too: the runner creates each admitted Job's pod, through tally's pod gate, marks it succeeded before completing the Job and deletes it when the Job is preempted, so that the gate's calls and tally's pod watch are in the run.")
		profile   = flag.Bool("profile", false, "Take CPU and allocation profiles of tally (it is given --pprof-bind-address; not in a replay run) and of the API server over the run, and the heap profile of each with the most in use.")
		apiLog    = flag.Int("apiserver-v", 0, "Keep the API server's log at this verbosity in the run's folder (apiserver.log); 0: no log. At 1 it names each Job watch it cuts off for falling behind.")
		kueue     = flag.String("kueue", "", "Compare tally with Kueue's scheduler-performance runner and minimalkueue from this folder (the toolchain's kueue-perf): -rounds rounds of, in turn, tally with its defaults, the same with the Jobs' pods played through its pod gate, tally at minimalkueue's client budget, minimalkueue as released and minimalkueue at tally's budget (minimalkueue-qps500).")
		tallyVer  = flag.String("tally-version", "", "What to call the tally binary's version in the comparison's header (make bench-kueue gives the commit).")
		rounds    = flag.Int("rounds", 3, "With -kueue, how many runs of each of the five.")
		only      = flag.String("contenders", "", "With -kueue, run only these of the five, a comma list of their names as the table gives them (tally, tally+pods, tally 50/100, kueue, kueue 500/1000); empty: all five.")
		tallyArgs stringList
		tallyEnv  stringList
	)
	flag.Var(&tallyArgs, "tally-arg", "An extra argument for `tally serve` (repeatable).")
	flag.Var(&tallyEnv, "tally-env", "KEY=VALUE added to tally's environment only, such as GOMAXPROCS=1 (repeatable); the API server and the runner keep theirs.")
	flag.Parse()
	if *mode == "floor" {
		*mode = "replay"
	}
	*held = *held || *heldOld
	if *mode != "tally" && *mode != "replay" && *mode != "both" {
		fmt.Fprintf(os.Stderr, "bench: -mode %q: want tally, replay or both\n", *mode)
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
	kueueTimeout := *timeout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *timeout == 0 {
		*timeout = 3*bound.Wall + 2*time.Minute
	}
	fmt.Printf("bench %s: %d Jobs in %d ClusterQueues; the ideal scheduler needs %.1fs (%.1fs of work for the quota)\n",
		sc.Name, len(plan.Jobs), len(plan.Queues), bound.Wall.Seconds(), plan.WorkSeconds()/(float64(plan.NominalMilli())/1000))
	if t := plan.Topology; t != nil {
		fmt.Printf("topology %s: %d nodes of %s cpu; the ideal scheduler knows quota only\n", t.Name, t.NodeCount(), t.NodeCapacity.CPU.String())
	}

	// measureRun runs the plan once, against tally (with tallyArgs) or as
	// the replay reference, and writes the per-Job times and files under name.
	// With pods, the runner plays the admitted Jobs' pods (as -pods);
	// timeout bounds the run.
	var measureRun func(replay bool, name string, tallyArgs []string, pods bool, timeout time.Duration) (*perf.Summary, *perf.Result, error)
	measure := func(replay bool) (*perf.Summary, error) {
		sum, _, err := measureRun(replay, sc.Name, tallyArgs, *pods, *timeout)
		return sum, err
	}
	measureRun = func(replay bool, name string, tallyArgs []string, pods bool, timeout time.Duration) (*perf.Summary, *perf.Result, error) {
		if replay {
			name += ".replay"
			if *held {
				fmt.Printf("\nthe held replay: tally's webhook, the decisions of the ideal scheduler without preemption, fed the completions, replayed as patches\n")
			} else {
				fmt.Printf("\nthe replay reference: tally's webhook, the ideal scheduler's decisions replayed as patches\n")
			}
		}
		dir := filepath.Join(*out, name)
		if err := os.RemoveAll(dir); err != nil {
			return nil, nil, err
		}
		opts := perf.Options{
			Plan: plan, Assets: *assets, TallyBin: *bin, Dir: dir, TallyArgs: tallyArgs, TallyEnv: tallyEnv, Replay: replay, HeldReplay: replay && *held, ExplainEvery: *explain, CreationPolicy: *policy, Pods: pods, APIServerLogLevel: *apiLog,
			Timeout: timeout, Workers: *workers, Progress: os.Stdout,
		}
		profilePrefix := filepath.Join(*out, name+".tally")
		if *profile {
			opts.APIServerProfile = filepath.Join(*out, name+".apiserver")
		}
		var profiles []string
		if *profile && !replay {
			ports, err := framework.FreePorts(1)
			if err != nil {
				return nil, nil, err
			}
			addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
			opts.TallyArgs = append(opts.TallyArgs, "--pprof-bind-address", addr)
			opts.During = func(ctx context.Context) error {
				var err error
				profiles, err = perf.CPUProfiles(ctx, perf.HTTPFetch("http://"+addr), 10, profilePrefix)
				return err
			}
		}
		res, runErr := perf.Run(ctx, opts)
		if res == nil {
			return nil, nil, runErr
		}
		sum, err := perf.Summarize(plan, res)
		if err != nil {
			return nil, nil, errors.Join(runErr, err)
		}
		jobs := filepath.Join(*out, name+".jobs.csv")
		if err := perf.WriteJobs(jobs, plan, res); err != nil {
			return nil, nil, err
		}
		fmt.Printf("per-Job times: %s; tally's log: %s\n", jobs, filepath.Join(dir, "tally.log"))
		if len(profiles) > 0 {
			fmt.Printf("tally CPU profiles, 10s each: go tool pprof -top %s %s\n", *bin, strings.Join(profiles, " "))
			fmt.Printf("tally's allocations up to the last of them: go tool pprof -sample_index=alloc_space -top %s %s.allocs.pprof\n", *bin, profilePrefix)
			fmt.Printf("tally's heap when the most was in use: go tool pprof -sample_index=inuse_space -top %s %s.heap.pprof\n", *bin, profilePrefix)
		}
		if len(res.APIServerProfiles) > 0 {
			fmt.Printf("the API server's CPU profiles, 10s each: go tool pprof -top %s\n", strings.Join(res.APIServerProfiles, " "))
		}
		if res.ReplayFailures > 0 && runErr == nil {
			runErr = fmt.Errorf("%d of the replay reference's writes failed", res.ReplayFailures)
		}
		if runErr != nil {
			return sum, res, fmt.Errorf("the run did not complete: %w", runErr)
		}
		return sum, res, nil
	}
	if *kueue != "" {
		return compare(ctx, sc, plan, bound, *kueue, *assets, *bin, *tallyVer, *out, kueueTimeout, *rounds, *only, tallyArgs, measureRun)
	}
	var sum, replay *perf.Summary
	var err1, err2 error
	if *mode != "replay" {
		sum, err1 = measure(false)
	}
	if *mode != "tally" && err1 == nil {
		replay, err2 = measure(true)
	}
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if sum == nil {
		sum = replay
	} else if replay != nil {
		sum.SetReplay(replay)
	}
	fmt.Println()
	if err := sum.Table(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	toWrite := []*perf.Summary{sum}
	if replay != nil && replay != sum {
		toWrite = append(toWrite, replay)
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

// compare runs, rounds times in turn, tally with its defaults, the same
// with the Jobs' pods played through its pod gate, tally at minimalkueue's
// client budget, Kueue as released and Kueue at tally's budget, and prints
// and writes the comparison.
func compare(ctx context.Context, sc *scenario.Scenario, plan *scenario.Plan, bound scenario.Stats, tools, assets, bin, tallyVersion, out string, kueueTimeout time.Duration, rounds int,
	only string, tallyArgs []string, measureRun func(replay bool, name string, tallyArgs []string, pods bool, timeout time.Duration) (*perf.Summary, *perf.Result, error)) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench:", err); return 1 }
	if bin == "" {
		return fail(errors.New("-kueue compares with tally: set TALLY_BIN (or -tally)"))
	}
	version, err := os.ReadFile(filepath.Join(tools, "VERSION"))
	if err != nil {
		return fail(fmt.Errorf("%w (e2e/toolchain/build.sh DIR kueue-perf builds it)", err))
	}
	v := strings.TrimSpace(string(version))
	gen, err := perf.KueueGenerator(sc)
	if err != nil {
		return fail(err)
	}
	genPath := filepath.Join(out, sc.Name+".kueue.generator.yaml")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(genPath, gen, 0o644); err != nil {
		return fail(err)
	}
	spec, err := kueueRangeSpec(sc, gen, genPath, tools, v)
	if err != nil {
		return fail(err)
	}
	if kueueTimeout == 0 {
		// Kueue's runner records for 10 minutes by default, and needs 6
		// to 7 for the baseline on 2 cores: leave room for a loaded
		// machine.
		kueueTimeout = max(15*time.Minute, 10*bound.Wall+2*time.Minute)
		if plan.Topology != nil {
			// Kueue's TAS target records for up to 20.
			kueueTimeout = max(kueueTimeout, 20*time.Minute)
		}
	}
	budget := func(qps, burst string) string { return "QPS " + qps + ", burst " + burst }
	tallyFlags := func(extra []string) string {
		return strings.TrimSpace("tally serve --register-webhooks " + strings.Join(extra, " "))
	}
	kueueBudget := []string{"--kube-api-qps=50", "--kube-api-burst=100"}
	kueueFlags := "minimalkueue --zap-log-level=2"
	if plan.Topology != nil {
		kueueFlags += " " + perf.KueueTASFlag
	}
	// The first three contenders are tally's, with these extra flags.
	lowBudget := append(slices.Clone(tallyArgs), kueueBudget...)
	args := [][]string{tallyArgs, tallyArgs, lowBudget}
	contenders := []*perf.Contender{
		{Name: "tally", Binary: filepath.Base(bin), Version: tallyVersion, Flags: tallyFlags(tallyArgs), Budget: budget("500", "1000") + " (its defaults)"},
		{Name: "tally+pods", Binary: filepath.Base(bin), Version: tallyVersion, Flags: tallyFlags(tallyArgs), Budget: budget("500", "1000") + " (its defaults)", Pods: true},
		{Name: "tally 50/100", Binary: filepath.Base(bin), Version: tallyVersion, Flags: tallyFlags(lowBudget), Budget: budget("50", "100") + " (minimalkueue's)"},
		{Name: "kueue", Binary: "minimalkueue", Version: v, Flags: kueueFlags, Budget: budget("50", "100") + " (its own)"},
		{Name: "kueue 500/1000", Binary: "minimalkueue-qps500", Version: v, Flags: kueueFlags, Budget: budget("500", "1000") + " (tally's defaults)"},
	}
	if b, err := os.ReadFile(filepath.Join(tools, "minimalkueue-qps500.edit")); err == nil {
		contenders[4].Edit = strings.TrimSpace(string(b))
	}
	keep, err := pick(contenders, only)
	if err != nil {
		return fail(err)
	}
	var kept []*perf.Contender
	for _, i := range keep {
		kept = append(kept, contenders[i])
	}
	cmp := &perf.Comparison{Scenario: sc.Name, KueueConfig: sc.KueueConfig, Jobs: len(plan.Jobs), APIServerFlags: perf.APIServerFlagsString(), Contenders: kept, Started: time.Now(),
		Ideal: perf.IdealFigures{WallSeconds: bound.Wall.Seconds(), Classes: map[string]float64{}}}
	var classes []string
	for i, c := range plan.Classes {
		classes = append(classes, c.Name)
		cmp.Ideal.Classes[c.Name] = bound.Classes[i].AvgTimeToAdmission.Seconds()
	}
	for round := 1; round <= rounds; round++ {
		for _, i := range keep {
			c := contenders[i]
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
			name := fmt.Sprintf("%s.compare.%d.%d", sc.Name, round, i)
			fmt.Printf("\nround %d of %d: %s (%s), files in %s\n", round, rounds, c.Name, c.Budget, filepath.Join(out, name))
			start := time.Now()
			var run perf.CompareRun
			var err error
			if i < len(args) {
				var sum *perf.Summary
				var res *perf.Result
				// tally's runs get Kueue's bound: at Kueue's client
				// budget tally runs close to the scenario's own.
				sum, res, err = measureRun(false, name, slices.Clone(args[i]), c.Pods, kueueTimeout)
				if sum != nil && res != nil && err == nil {
					run = perf.TallyRun(plan, sum, res)
				}
			} else {
				var k *perf.KueueResult
				k, err = perf.RunKueue(ctx, perf.KueueOptions{Plan: plan, Tools: tools, MinimalKueue: c.Binary, Assets: assets, Generator: genPath,
					Dir: filepath.Join(out, name), Timeout: kueueTimeout, Progress: os.Stdout})
				if k != nil && err == nil {
					run = perf.KueueRun(plan, k, spec.Check(k))
				}
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s, round %d: %v\n", c.Name, round, err)
				c.Failed = append(c.Failed, fmt.Sprintf("round %d: %v", round, err))
				continue
			}
			fmt.Printf("%s: wall %.1fs, CPU %.1fs, done in %.0fs\n", c.Name, run.WallSeconds, run.CPUSeconds, time.Since(start).Seconds())
			c.Runs = append(c.Runs, run)
			cmp.Took = time.Since(cmp.Started)
			if _, err := cmp.Write(out); err != nil {
				return fail(err)
			}
		}
	}
	fmt.Println()
	if err := cmp.Table(os.Stdout, classes); err != nil {
		return fail(err)
	}
	path, err := cmp.Write(out)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("\ncomparison: %s\n", path)
	return 0
}

// pick is the indexes of the contenders named in only (a comma list;
// empty: all), in their order.
func pick(contenders []*perf.Contender, only string) ([]int, error) {
	want := map[string]bool{}
	for _, name := range strings.Split(only, ",") {
		if name = strings.TrimSpace(name); name != "" {
			want[name] = true
		}
	}
	all := len(want) == 0
	var keep []int
	var names []string
	for i, c := range contenders {
		names = append(names, c.Name)
		if all || want[c.Name] {
			keep = append(keep, i)
		}
		delete(want, c.Name)
	}
	if len(want) > 0 {
		return nil, fmt.Errorf("-contenders: no contender named %q; they are %q", slices.Sorted(maps.Keys(want)), names)
	}
	return keep, nil
}

// kueueRangeSpec checks the scenario's generator config gen (written to
// genPath) against Kueue's own config of the scenario (sc.KueueConfig),
// says so, and returns that config's rangespec.yaml, by which Kueue's
// runs are judged: nil when the scenario names no Kueue config, when
// Kueue's release v (in tools) has none of that name, or when the work
// differs from Kueue's, where Kueue's bounds do not apply.
func kueueRangeSpec(sc *scenario.Scenario, gen []byte, genPath, tools, v string) (*perf.KueueRangeSpec, error) {
	name := sc.KueueConfig
	if name == "" {
		fmt.Printf("kueue: scenario %s names no Kueue config (kueueConfig): no rangespec.yaml verdict\n", sc.Name)
		return nil, nil
	}
	own, err := os.ReadFile(filepath.Join(tools, "configs", name, "generator.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		fmt.Printf("kueue: Kueue %s has no configs/%s: the work is not checked against Kueue's, and no rangespec.yaml verdict\n", v, name)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	same, err := perf.SameKueueGenerator(gen, own)
	if err != nil {
		return nil, fmt.Errorf("Kueue's configs/%s/generator.yaml: %w", name, err)
	}
	if !same {
		fmt.Printf("kueue: %s is NOT the same work as Kueue %s's configs/%s/generator.yaml: no rangespec.yaml verdict\n", genPath, v, name)
		return nil, nil
	}
	fmt.Printf("kueue: %s is the same work as Kueue %s's configs/%s/generator.yaml\n", genPath, v, name)
	spec, err := perf.ReadKueueRangeSpec(tools, name)
	if spec == nil && err == nil {
		fmt.Printf("kueue: Kueue %s has no configs/%s/rangespec.yaml: no verdict\n", v, name)
	}
	return spec, err
}
