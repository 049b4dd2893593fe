package ledger

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files of the ledger scenarios (testdata/scenarios/*.out)")

// The ledger's scenarios: each testdata/scenarios/NAME.txt is a script of
// what the informers show and what the API writes do, one command a line;
// NAME.out is what the ledger does at each step: the writes a pass
// decides, the Events it records, and every workload's state and the
// queues' usage after the step. go test ./ledger -run TestScenarios
// -rewrite regenerates the .out files; review their diff.
//
// Commands (the workloads are in namespace ns, which queues to q or r):
//
//	create NAME [pytorch|jobset|ray] [unrecorded] [cpu=N] [workers=N] [max=M] [queue=Q] [lq=LQ] [prio=N] [owner=NAME [owner-uid=UID]]
//	                    (cpu=none: its containers request nothing)
//	                    a new suspended pending workload (a Job, or a
//	                    PyTorchJob of one master and N workers, or a JobSet
//	                    of a leader Job and N worker Jobs, or a RayJob of a
//	                    head, a group of N workers and a submitter; max:
//	                    the cluster autoscales, the group between 0 and M
//	                    workers); cpu per pod;
//	                    unrecorded: one that runs without tally's record;
//	                    lq: its kueue.x-k8s.io/queue-name label;
//	                    owner: its controller owner is workload NAME (by
//	                    owner-uid, if given, rather than NAME's own UID)
//	pass                an admission pass: the writes it decides
//	landed NAME         the informer shows NAME's decided write (admission,
//	                    preemption or capture) applied: its merge patch,
//	                    applied to the object
//	conflict NAME       NAME's decided admission write failed: Conflict
//	running NAME        its pods run (status: active, startTime)
//	stopped NAME        its controller stopped it (no pods; Suspended)
//	finish NAME         it completed
//	delete NAME         it is gone
//	pods NAME N         N of its pods (labelled with its UID by its
//	                    admission) run; fewer than before: the others
//	                    succeeded
//	limitrange NAME CPU|none
//	                    LimitRange NAME of namespace ns gives containers a
//	                    default cpu request of CPU, or is deleted
//	ghostpod NAME POD [ns=NS] [owner=rs|OWNER]
//	                    a running pod POD of 1 cpu, labelled with NAME's
//	                    UID, in namespace NS (default ns), with no
//	                    controller, a ReplicaSet, or workload OWNER
//	restart [pods-first] a new ledger is given every object and pod the
//	                    informers hold (pods first: before the workloads)
//	priority NAME N     its pod template's priority becomes N
//	suspend NAME        its owner suspends it (its pods still run)
//	quota N             a config with N cpu of nominal quota in q is loaded
//	stop Q|lq POLICY    a config is loaded in which ClusterQueue Q, or
//	                    the LocalQueue lq of namespace ns (to q), has
//	                    stopPolicy POLICY (None, Hold or HoldAndDrain)
//	tree [fair]         the tree config (scenarioTreeConfig) is loaded;
//	                    fair: with fair sharing, cohort infra of weight 2
//	mode K=V...         the ledger's write modes from now on (and after a
//	                    restart): events=, finished-label=, admission-patch=
//	                    (a json admission lands as its JSON patch)
//	budget N [QPS]      the client may send N requests at once from now
//	                    on, and QPS a second (Options.Budget; default 10)
//	labels              the label writes asked for since the last labels:
//	                    the label worker's, then the lazy finished ones'
//
// Namespace ns is bound to q by its annotation.
const scenarioConfig = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  cohort: c
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: %d}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: r}
spec:
  cohort: c
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 2}]
`

// scenarioTreeConfig is a tree of cohorts: org holds 2 cpu of its own;
// below it, cohort ml holds q (2 cpu) and t (no quota), and cohort infra
// holds r (4 cpu). q and r reclaim from any queue of the tree.
const scenarioTreeConfig = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: ml}
spec: {parentName: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: infra}
spec: {parentName: org}
` + treeQueue + treeQueue + treeQueue

// treeQueue is a ClusterQueue of scenarioTreeConfig: name, cohort,
// preemption and quota are filled in by treeConfig.
const treeQueue = `---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %s}
spec:
  cohortName: %s
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: %s}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: %d}]
`

// treeConfig is the scenarios' tree config; fair gives its cohorts
// fairSharing, weight 1 for ml and 2 for infra.
func (s *scenario) treeConfig(fair bool) *queues.Config {
	doc := scenarioTreeConfig
	if fair {
		doc = strings.NewReplacer("{name: ml}\nspec: {parentName: org}", "{name: ml}\nspec: {parentName: org, fairSharing: {}}",
			"{name: infra}\nspec: {parentName: org}", "{name: infra}\nspec: {parentName: org, fairSharing: {weight: 2}}").Replace(doc)
	}
	cfg, _, errs := queues.Parse([]byte(fmt.Sprintf(doc, "q", "ml", "Any", 2, "t", "ml", "Never", 0, "r", "infra", "Any", 4)))
	if len(errs) > 0 {
		s.t.Fatal(errs)
	}
	return cfg
}

// eachScenario runs test, as a subtest named after the file, on every
// golden scenario script in testdata/scenarios.
func eachScenario(t *testing.T, test func(t *testing.T, file, script string)) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			script, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			test(t, file, string(script))
		})
	}
}

func TestScenarios(t *testing.T) {
	eachScenario(t, func(t *testing.T, file, script string) {
		got := runScenario(t, script)
		golden := strings.TrimSuffix(file, ".txt") + ".out"
		if *rewrite {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -rewrite to create it)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs from %s (run with -rewrite and review the diff):\n%s", strings.TrimSuffix(filepath.Base(file), ".txt"), golden, lineDiff(string(want), got))
		}
	})
}

// scenario is one run: the ledger, the objects as the informer holds
// them, and the writes the last passes decided, by workload name.
type scenario struct {
	t       *testing.T
	l       *Ledger
	clock   *clocktesting.FakeClock
	rec     *scenarioRecorder
	objects map[string]client.Object
	writes  map[string]write
	pods    map[string]int
	out     strings.Builder
	// reg holds the ledger's metrics (a new one with each ledger).
	reg *prometheus.Registry
	// modes are the ledger's write modes (mode).
	modes Options
	// quota is q's nominal cpu (quota), and stops the stop policies
	// (stop) of the config, by queue.
	quota int
	stops map[string]string
	// timers are the ledger's timers (Ledger.after), run once the fake
	// clock has passed them, in order.
	timers []scenarioTimer
}

type scenarioTimer struct {
	at time.Time
	f  func()
}

// scenarioClock is the scenario's fake clock, whose AfterFunc timers run
// in order at the step that passes them (runTimers).
type scenarioClock struct {
	*clocktesting.FakeClock
	s *scenario
}

func (c scenarioClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.s.timers = append(c.s.timers, scenarioTimer{at: c.Now().Add(d), f: f})
	return c.NewTimer(d)
}

// runTimers runs the timers the clock has passed, in order.
func (s *scenario) runTimers() {
	for {
		sort.SliceStable(s.timers, func(i, j int) bool { return s.timers[i].at.Before(s.timers[j].at) })
		if len(s.timers) == 0 || s.timers[0].at.After(s.clock.Now()) {
			return
		}
		f := s.timers[0].f
		s.timers = s.timers[1:]
		f()
	}
}

func newScenario(t *testing.T) *scenario {
	s := &scenario{t: t, quota: 4, clock: clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		rec: &scenarioRecorder{}, objects: map[string]client.Object{}, writes: map[string]write{}, pods: map[string]int{}}
	s.newLedger(s.config(s.quota))
	return s
}

// runScenario runs script and returns what the ledger did; after, if
// given, is called after each step.
func runScenario(t *testing.T, script string, after ...func(*scenario)) string {
	s := newScenario(t)
	sc := bufio.NewScanner(strings.NewReader(script))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			if line != "" {
				fmt.Fprintln(&s.out, line)
			}
			continue
		}
		fmt.Fprintf(&s.out, "> %s\n", line)
		s.step(strings.Fields(line))
		s.report()
		for _, f := range after {
			f(s)
		}
		s.clock.Step(time.Second)
		s.runTimers()
	}
	return s.out.String()
}

func (s *scenario) newLedger(cfg *queues.Config) {
	s.reg = prometheus.NewRegistry()
	s.l = New(nil, nil, queues.NewStore(nil), s.rec, logr.Discard(), Options{Clock: scenarioClock{s.clock, s}, Registry: s.reg,
		Events: s.modes.Events, FinishedLabel: s.modes.FinishedLabel, AdmissionPatch: s.modes.AdmissionPatch})
	s.l.cfg = cfg
	s.l.metrics.ObserveConfig(cfg, s.l.books.usage)
	s.l.synced = true
	s.l.namespaces["ns"] = &nsInfo{queue: "q"}
	s.l.writer.spawn = func(f func()) { f() }
	s.l.watches.list = func(context.Context) ([]*kinds.Object, error) {
		var out []*kinds.Object
		for _, n := range queues.SortedKeys(s.objects) {
			o, _ := s.l.opts.Kinds.Of(s.objects[n])
			out = append(out, o)
		}
		return out, nil
	}
}

// priorityClass names a PriorityClass of value n, which the ledger knows
// (as if its informer had brought it before any Job names it).
func (s *scenario) priorityClass(n int) string {
	name := fmt.Sprintf("prio-%d", n)
	s.l.mu.Lock()
	s.l.inputs.priorities[name] = int32(n)
	s.l.mu.Unlock()
	return name
}

// setPods makes n of name's pods run; those beyond n succeed.
func (s *scenario) setPods(name string, n int) {
	gvk := batchv1.SchemeGroupVersion.WithKind("Job")
	if o, ok := s.objects[name]; ok {
		gvk = o.GetObjectKind().GroupVersionKind()
	}
	for i := range max(n, s.pods[name]) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", name, i),
			UID: types.UID(fmt.Sprintf("pod-%s-%d", name, i)), Labels: map[string]string{queues.LabelWorkload: "uid-" + name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name,
				UID: types.UID("uid-" + name), Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if i >= n {
			pod.Status.Phase = corev1.PodSucceeded
		}
		s.l.onPod(pod)
	}
	s.pods[name] = n
}

func (s *scenario) step(f []string) {
	cmd, name := f[0], ""
	if len(f) > 1 {
		name = f[1]
	}
	switch cmd {
	case "create":
		s.create(name, f[2:])
	case "pass":
		for _, w := range s.l.decide() {
			s.writes[w.w.Name] = w
			switch {
			case w.preemptor != nil:
				fmt.Fprintf(&s.out, "write: preempt %s for %s\n", w.w.Name, w.preemptor.W.Name)
			case w.late:
				fmt.Fprintf(&s.out, "write: capture %s\n", w.w.Name)
			case w.stop.Stopped():
				fmt.Fprintf(&s.out, "write: evict %s (%s)\n", w.w.Name, w.stop.Reason)
			default:
				fmt.Fprintf(&s.out, "write: admit %s in %s (%s)\n", w.w.Name, strings.Join(w.a.Flavors, "+"), w.a.Annotation(w.w))
			}
		}
		if s.l.writer.bounded.Load() {
			fmt.Fprintf(&s.out, "pass: stopped at its budget; short of tokens (labels wait): %v; next pass asked for by a timer: %v\n", s.l.writer.short.Load(), s.l.writer.budgetWake.Load())
		}
	case "landed":
		w, ok := s.writes[name]
		if !ok {
			s.t.Fatalf("landed %s: no write decided for it; so far:\n%s", name, s.out.String())
		}
		delete(s.writes, name)
		var patch []byte
		var err error
		evicts := w.preemptor != nil || w.stop.Stopped()
		switch {
		case evicts:
			var ev kinds.Eviction
			ev, err = s.l.target(w).Evict(nil)
			patch = ev.Patch
			if w.stop.Stopped() {
				s.l.requeued(w, w.stop.Reason)
			} else {
				s.l.evicted(w)
			}
		case w.late:
			patch, err = capturePatch(w, s.clock.Now())
			s.l.captured(w, nil)
		default:
			patch, err = s.l.admissionPatch(w, s.clock.Now())
			s.l.admitted(w, s.clock.Now())
		}
		if err != nil {
			s.t.Fatal(err)
		}
		asJSON := !evicts && !w.late && s.l.opts.AdmissionPatch == AdmissionPatchJSON
		if asJSON {
			if patch, err = jsonAdmissionPatch(s.objects[name], w.rv, patch); err != nil {
				s.t.Fatal(err)
			}
		}
		s.update(name, func(m map[string]any) {
			if asJSON {
				jsonPatch(m, patch, s.t)
			} else {
				mergePatch(m, patch, s.t)
			}
			if evicts || w.late {
				return
			}
			for _, path := range w.paths {
				if v := kinds.At(m, kinds.Join(path, "metadata", "labels", queues.LabelWorkload)); path != nil && v != string(w.w.UID) {
					s.t.Errorf("landed %s: pod template at %s labelled %s=%v, want its UID", name, kinds.FieldPath(path), queues.LabelWorkload, v)
				}
			}
		})
	case "conflict":
		w, ok := s.writes[name]
		if !ok {
			s.t.Fatalf("conflict %s: no write decided for it", name)
		}
		delete(s.writes, name)
		s.l.rollback(w, apierrors.NewConflict(schema.GroupResource{Resource: "jobs"}, name, errors.New("modified")))
	case "running":
		s.update(name, func(m map[string]any) {
			o := s.read(name)
			setStatus(m, o, map[string]any{"startTime": s.clock.Now().Format(time.RFC3339)}, int64(o.PodCount()), "")
		})
	case "stopped":
		s.update(name, func(m map[string]any) {
			setStatus(m, s.read(name), map[string]any{}, 0, "Suspended")
		})
	case "finish":
		s.update(name, func(m map[string]any) {
			o := s.read(name)
			done := map[string]string{"Job": "Complete", "JobSet": "Completed"}[o.Kind.GVK().Kind]
			if done == "" {
				done = "Succeeded"
			}
			setStatus(m, o, map[string]any{}, 0, done)
		})
	case "priority":
		n, _ := strconv.Atoi(f[2])
		class := s.priorityClass(n)
		s.update(name, func(m map[string]any) {
			for _, ps := range s.read(name).PodSets {
				_ = unstructured.SetNestedField(m, class, kinds.Join(ps.Path, "spec", "priorityClassName")...)
			}
		})
	case "suspend":
		s.update(name, func(m map[string]any) {
			_ = unstructured.SetNestedField(m, true, s.read(name).Kind.SuspendPath()...)
		})
	case "budget":
		tokens, err := strconv.ParseFloat(name, 64)
		qps := 10.0
		if err == nil && len(f) > 2 {
			qps, err = strconv.ParseFloat(f[2], 64)
		}
		if err != nil {
			s.t.Fatalf("budget %s: %v", strings.Join(f[1:], " "), err)
		}
		s.l.writer.budget = func() (float64, float64) { return tokens, qps }
	case "mode":
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "events":
				s.modes.Events = Events(v)
			case "finished-label":
				s.modes.FinishedLabel = FinishedLabel(v)
			case "admission-patch":
				s.modes.AdmissionPatch = AdmissionPatch(v)
			default:
				s.t.Fatalf("mode %s: unknown", k)
			}
		}
		s.l.opts.Events, s.l.opts.FinishedLabel, s.l.opts.AdmissionPatch = s.modes.Events, s.modes.FinishedLabel, s.modes.AdmissionPatch
	case "labels":
		for _, q := range []struct {
			name  string
			queue interface {
				Len() int
				Get() (types.UID, bool)
				Done(types.UID)
			}
		}{{"label worker", s.l.labels.jobs}, {"lazy finished", s.l.labels.finished}} {
			var uids []string
			for q.queue.Len() > 0 {
				uid, _ := q.queue.Get()
				q.queue.Done(uid)
				uids = append(uids, strings.TrimPrefix(string(uid), "uid-"))
			}
			sort.Strings(uids)
			fmt.Fprintf(&s.out, "labels due (%s): %s\n", q.name, strings.Join(uids, " "))
		}
	case "quota":
		s.quota, _ = strconv.Atoi(name)
		s.l.reconfigure(s.config(s.quota))
	case "stop":
		if s.stops == nil {
			s.stops = map[string]string{}
		}
		s.stops[name] = f[2]
		s.l.reconfigure(s.config(s.quota))
	case "tree":
		s.l.reconfigure(s.treeConfig(name == "fair"))
	case "delete":
		s.l.onJobDelete(s.objects[name])
		delete(s.objects, name)
	case "pods":
		n, err := strconv.Atoi(f[2])
		if err != nil {
			s.t.Fatalf("pods %s: %v", name, err)
		}
		s.setPods(name, n)
	case "limitrange":
		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if f[2] == "none" {
			s.l.onLimitRangeDelete(lr)
			break
		}
		lr.Spec.Limits = []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(f[2])}}}
		s.l.onLimitRange(lr)
	case "ghostpod":
		opts := map[string]string{"ns": "ns"}
		for _, a := range f[3:] {
			k, v, _ := strings.Cut(a, "=")
			opts[k] = v
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: opts["ns"], Name: f[2], UID: types.UID("pod-" + f[2]),
			Labels: map[string]string{queues.LabelWorkload: "uid-" + name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		switch owner := opts["owner"]; owner {
		case "":
		case "rs":
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: ptr.To(true)}}
		default:
			gvk := s.objects[owner].GetObjectKind().GroupVersionKind()
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner,
				UID: types.UID("uid-" + owner), Controller: ptr.To(true)}}
		}
		s.l.onPod(pod)
	case "podsready":
		// podsready TIMEOUT BACKOFF LIMIT [block] [timestamp=T]:
		// waitForPodsReady on; T is requeuingStrategy.timestamp (left
		// out: unset). Its deadlines are run by timeout, not by the
		// timers.
		timeout, err1 := time.ParseDuration(name)
		base, err2 := time.ParseDuration(f[2])
		limit, err3 := strconv.Atoi(f[3])
		if err := errors.Join(err1, err2, err3); err != nil {
			s.t.Fatalf("podsready: %v", err)
		}
		pr := &queues.PodsReady{Timeout: timeout, BackoffBase: base, BackoffMax: time.Hour, BackoffLimitCount: ptr.To(int32(limit))}
		for _, opt := range f[4:] {
			switch k, v, _ := strings.Cut(opt, "="); k {
			case "block":
				pr.BlockAdmission = true
			case "timestamp":
				pr.Timestamp = v
			default:
				s.t.Fatalf("podsready: unknown option %q", opt)
			}
		}
		s.l.cfg.PodsReady = pr
		s.l.writer.stop()
	case "ready":
		// ready NAME PODS READY: NAME's PODS pods run, READY of them Ready.
		n, err1 := strconv.Atoi(f[2])
		r, err2 := strconv.Atoi(f[3])
		if err := errors.Join(err1, err2); err != nil {
			s.t.Fatalf("ready: %v", err)
		}
		s.readyPods(name, n, r)
	case "tick":
		d, err := time.ParseDuration(name)
		if err != nil {
			s.t.Fatalf("tick: %v", err)
		}
		s.clock.Step(d)
		s.runTimers()
	case "timeout":
		// timeout NAME: NAME's pods-ready deadline is due now; its
		// eviction lands.
		_, ann := s.timeOut(name)
		fmt.Fprintf(&s.out, "write: evict %s requeues=%v requeue-at=%v evicted-at=%v\n", name, ann[queues.AnnotationRequeues], ann[queues.AnnotationRequeueAt], ann[queues.AnnotationEvictedAt])
	case "restart":
		cfg, classes := s.l.cfg, s.l.inputs.priorities
		s.newLedger(cfg)
		s.l.inputs.priorities = classes
		live := s.pods
		s.pods = map[string]int{}
		replayPods := func() {
			for _, n := range queues.SortedKeys(live) {
				s.setPods(n, live[n])
			}
		}
		if name == "pods-first" {
			replayPods()
		}
		for _, n := range queues.SortedKeys(s.objects) {
			s.l.onJob(informed(s.objects[n]))
		}
		if name != "pods-first" {
			replayPods()
		}
	default:
		s.t.Fatalf("unknown command %q", cmd)
	}
}

// create makes a suspended pending workload as the webhook leaves it.
func (s *scenario) create(name string, args []string) {
	opts := map[string]string{"cpu": "1", "workers": "1", "queue": "q", "prio": "0"}
	pytorch, jobset, ray, unrecorded := false, false, false, false
	for _, a := range args {
		switch a {
		case "pytorch":
			pytorch = true
			continue
		case "jobset":
			jobset = true
			continue
		case "ray":
			ray = true
			continue
		case "unrecorded":
			unrecorded = true
			continue
		}
		k, v, _ := strings.Cut(a, "=")
		opts[k] = v
	}
	prio, _ := strconv.Atoi(opts["prio"])
	tpl := map[string]any{"spec": map[string]any{"priorityClassName": s.priorityClass(prio), "containers": []any{map[string]any{
		"name": "c", "resources": map[string]any{}}}}}
	if opts["cpu"] != "none" {
		tpl["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["resources"] = map[string]any{"requests": map[string]any{"cpu": opts["cpu"]}}
	}
	meta := map[string]any{
		"namespace": "ns", "name": name, "uid": "uid-" + name, "resourceVersion": "1", "generation": int64(1),
		"creationTimestamp": s.clock.Now().Format(time.RFC3339),
		"labels":            map[string]any{queues.LabelState: "pending", queues.LabelQueue: opts["queue"]},
		"annotations":       map[string]any{queues.AnnotationUserAffinity: ""},
	}
	if lq := opts["lq"]; lq != "" {
		meta["labels"].(map[string]any)[queues.LabelKueueQueueName] = lq
	}
	m := map[string]any{"metadata": meta}
	switch {
	case jobset:
		workers, _ := strconv.ParseInt(opts["workers"], 10, 64)
		m["apiVersion"], m["kind"] = "jobset.x-k8s.io/v1alpha2", "JobSet"
		rj := func(name string, replicas int64) map[string]any {
			return map[string]any{"name": name, "replicas": replicas,
				"template": map[string]any{"spec": map[string]any{"template": runtime.DeepCopyJSONValue(tpl)}}}
		}
		m["spec"] = map[string]any{"suspend": true, "replicatedJobs": []any{rj("leader", 1), rj("workers", workers)}}
	case ray:
		workers, _ := strconv.ParseInt(opts["workers"], 10, 64)
		m["apiVersion"], m["kind"] = "ray.io/v1", "RayJob"
		group := map[string]any{"groupName": "workers", "replicas": workers, "template": runtime.DeepCopyJSONValue(tpl)}
		cluster := map[string]any{"headGroupSpec": map[string]any{"template": tpl}, "workerGroupSpecs": []any{group}}
		if hi := opts["max"]; hi != "" {
			n, _ := strconv.ParseInt(hi, 10, 64)
			group["minReplicas"], group["maxReplicas"] = int64(0), n
			cluster["enableInTreeAutoscaling"] = true
		}
		m["spec"] = map[string]any{"suspend": true, "entrypoint": "python main.py", "rayClusterSpec": cluster,
			"submitterPodTemplate": runtime.DeepCopyJSONValue(tpl)}
	case pytorch:
		workers, _ := strconv.ParseInt(opts["workers"], 10, 64)
		m["apiVersion"], m["kind"] = "kubeflow.org/v1", "PyTorchJob"
		m["spec"] = map[string]any{"runPolicy": map[string]any{"suspend": true}, "pytorchReplicaSpecs": map[string]any{
			"Master": map[string]any{"replicas": int64(1), "template": tpl},
			"Worker": map[string]any{"replicas": workers, "template": runtime.DeepCopyJSONValue(tpl)},
		}}
	default:
		m["apiVersion"], m["kind"] = "batch/v1", "Job"
		m["spec"] = map[string]any{"suspend": true, "template": tpl}
	}
	if owner := opts["owner"]; owner != "" {
		o := s.read(owner)
		uid := cmp.Or(opts["owner-uid"], string(o.Meta.UID))
		meta["ownerReferences"] = []any{map[string]any{"apiVersion": o.Kind.GVK().GroupVersion().String(), "kind": o.Kind.GVK().Kind,
			"name": owner, "uid": uid, "controller": true}}
	}
	if unrecorded {
		meta["labels"] = map[string]any{queues.LabelQueue: opts["queue"]}
		delete(meta, "annotations")
		o, _ := s.l.opts.Kinds.Of(s.fromMap(m))
		_ = unstructured.SetNestedField(m, false, o.Kind.SuspendPath()...)
		setStatus(m, o, map[string]any{"startTime": s.clock.Now().Format(time.RFC3339)}, o.PodCount(), "")
	}
	s.objects[name] = s.fromMap(m)
	s.l.onJob(informed(s.objects[name]))
}

// config is the scenarios' config, with n cpu of nominal quota in q and
// the stop policies of stop; with any, LocalQueue lq of namespace ns
// queues to q.
func (s *scenario) config(n int) *queues.Config {
	text := fmt.Sprintf(scenarioConfig, n)
	for _, q := range []string{"q", "r"} {
		if p := s.stops[q]; p != "" {
			text = strings.Replace(text, "metadata: {name: "+q+"}\nspec:\n", "metadata: {name: "+q+"}\nspec:\n  stopPolicy: "+p+"\n", 1)
		}
	}
	if len(s.stops) > 0 {
		text += "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns}\nspec: {clusterQueue: q, stopPolicy: " + cmp.Or(s.stops["lq"], "None") + "}\n"
	}
	cfg, _, errs := queues.Parse([]byte(text))
	if len(errs) > 0 {
		s.t.Fatal(errs)
	}
	return cfg
}

// update changes NAME's object as a map, bumps its resourceVersion, and
// its generation if more than its metadata and status changed, and
// delivers it.
func (s *scenario) update(name string, change func(map[string]any)) {
	obj := s.objects[name]
	if obj == nil {
		s.t.Fatalf("no workload %s", name)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		s.t.Fatal(err)
	}
	spec := func(m map[string]any) map[string]any {
		c := maps.Clone(m)
		delete(c, "metadata")
		delete(c, "status")
		return c
	}
	before := runtime.DeepCopyJSON(spec(m))
	change(m)
	rv, _ := strconv.Atoi(obj.GetResourceVersion())
	_ = unstructured.SetNestedField(m, strconv.Itoa(rv+1), "metadata", "resourceVersion")
	if !equality.Semantic.DeepEqual(before, spec(m)) {
		_ = unstructured.SetNestedField(m, obj.GetGeneration()+1, "metadata", "generation")
	}
	s.objects[name] = s.fromMap(m)
	s.l.onJob(informed(s.objects[name]))
}

// fromMap builds the object the API server holds: a Job, or an
// unstructured object.
func (s *scenario) fromMap(m map[string]any) client.Object {
	if m["kind"] == "Job" {
		job := &batchv1.Job{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, job); err != nil {
			s.t.Fatal(err)
		}
		return job
	}
	return &unstructured.Unstructured{Object: m}
}

// informed is what the informer hands over of obj: a copy of a Job
// stripped by the cache's transform, or obj.
func informed(obj client.Object) client.Object {
	if job, ok := obj.(*batchv1.Job); ok {
		return StripJobOrDie(job.DeepCopy())
	}
	return obj
}

func (s *scenario) read(name string) *kinds.Object {
	o, ok := s.l.opts.Kinds.Of(s.objects[name])
	if !ok {
		s.t.Fatalf("%s is not a workload", name)
	}
	return o
}

// setStatus sets a workload's status as its controller would: startTime
// and the like from extra, active pods, and a true condition.
func setStatus(m map[string]any, o *kinds.Object, status map[string]any, active int64, condition string) {
	if condition != "" {
		status["conditions"] = []any{map[string]any{"type": condition, "status": "True",
			"lastTransitionTime": time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)}}
	}
	switch o.Kind.GVK().Kind {
	case "Job":
		if active > 0 {
			status["active"] = active
		}
	case "JobSet":
		if active > 0 {
			status["replicatedJobsStatus"] = []any{map[string]any{"name": "leader", "active": int64(1)}}
		}
	default:
		if active == 0 {
			break
		}
		rs := map[string]any{}
		for _, ps := range o.PodSets {
			rs[ps.Path[2]] = map[string]any{"active": ps.Count}
		}
		status["replicaStatuses"] = rs
	}
	m["status"] = status
}

// report prints the Events recorded since the last step, then every
// workload's state and each queue's usage.
func (s *scenario) report() {
	for _, e := range s.rec.take() {
		fmt.Fprintf(&s.out, "event: %s\n", e)
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	var lines []string
	for _, e := range s.l.jobs {
		if e.W == nil {
			continue
		}
		line := fmt.Sprintf("  %s: %s", e.W.Name, cmpOr(string(e.Phase().Label()), e.Phase().String()))
		if e.Phase() == machine.Assumed || e.Phase() == machine.Evicting {
			line += " " + e.Phase().String()
		}
		if e.Captured {
			line += " captured"
		}
		if e.InTree {
			line += " queued"
		}
		if e.Claim != nil && len(e.Claim.Victims) > 0 {
			var names []string
			for uid := range e.Claim.Victims {
				names = append(names, strings.TrimPrefix(string(uid), "uid-"))
			}
			sort.Strings(names)
			line += " waiting-for=" + strings.Join(names, ",")
		}
		if e.Charged != nil {
			line += " charged: " + cmpOr(e.Charged.Describe(), "-")
		}
		if e.Claim != nil && e.Claim.Usage != nil {
			line += " claim: " + e.Claim.Usage.Describe()
		}
		if n := s.l.pods.liveOf(e.W.UID); n > 0 {
			line += fmt.Sprintf(" pods=%d", n)
		}
		lines = append(lines, line)
	}
	for _, e := range s.l.pods.ghosts {
		lines = append(lines, fmt.Sprintf("  %s: deleted pods=%d charged: %s", e.W.Name, s.l.pods.liveOf(e.W.UID), e.Charged.Describe()))
	}
	s.checkHolding()
	if err := s.l.pods.check(); err != nil {
		s.t.Errorf("pod book: %v", err)
	}
	sort.Strings(lines)
	for _, q := range queues.SortedKeys(s.l.books.usage) {
		lines = append(lines, fmt.Sprintf("  usage %s: %s", q, s.l.books.usage[q].Describe()))
	}
	fmt.Fprintln(&s.out, strings.Join(lines, "\n"))
}

// checkHolding fails the test unless the holding sets file exactly the
// entries that hold quota, each under the queue it is charged in.
func (s *scenario) checkHolding() {
	s.t.Helper()
	want := map[*entry]bool{}
	for _, e := range s.l.jobs {
		if e.Charged != nil {
			want[e] = true
		}
	}
	for _, e := range s.l.pods.ghosts {
		if e.Charged != nil {
			want[e] = true
		}
	}
	n := 0
	for q, set := range s.l.books.holding {
		for e := range set {
			n++
			if !want[e] || e.ChargedQueue != q {
				s.t.Errorf("holding[%s] has %s, charged %v in %q", q, e.W.Key(), e.Charged, e.ChargedQueue)
			}
		}
	}
	if n != len(want) {
		s.t.Errorf("holding files %d entries, %d hold quota", n, len(want))
	}
}

// scenarioRecorder keeps the Events as "NAME Reason: message".
type scenarioRecorder struct{ events []string }

func (r *scenarioRecorder) Event(obj runtime.Object, _, reason, message string) {
	m, _ := meta.Accessor(obj)
	r.events = append(r.events, fmt.Sprintf("%s %s: %s", m.GetName(), reason, message))
}

func (r *scenarioRecorder) Eventf(obj runtime.Object, t, reason, format string, args ...any) {
	r.Event(obj, t, reason, fmt.Sprintf(format, args...))
}

func (r *scenarioRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, t, reason, format string, args ...any) {
	r.Eventf(obj, t, reason, format, args...)
}

func (r *scenarioRecorder) take() []string {
	out := r.events
	r.events = nil
	return out
}

// mergePatch applies an RFC 7386 JSON merge patch to m.
// jsonPatch applies a JSON patch to m, failing the test if it does not
// apply: a JSON patch names the objects it adds into.
func jsonPatch(m map[string]any, patch []byte, t *testing.T) {
	t.Helper()
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("JSON patch %s does not apply: %v", patch, err)
	}
	var applied map[string]any
	if err := utiljson.Unmarshal(out, &applied); err != nil {
		t.Fatal(err)
	}
	clear(m)
	maps.Copy(m, applied)
}

func mergePatch(m map[string]any, patch []byte, t *testing.T) {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		t.Fatal(err)
	}
	var merge func(dst, src map[string]any)
	merge = func(dst, src map[string]any) {
		for k, v := range src {
			switch v := v.(type) {
			case nil:
				delete(dst, k)
			case map[string]any:
				d, ok := dst[k].(map[string]any)
				if !ok {
					d = map[string]any{}
					dst[k] = d
				}
				merge(d, v)
			default:
				dst[k] = v
			}
		}
	}
	delete(p["metadata"].(map[string]any), "resourceVersion")
	merge(m, runtime.DeepCopyJSON(p))
}

// lineDiff shows the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, a, b)
		}
	}
	return ""
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestScenariosScopedLikeFull: a pass decides only the queues whose inputs
// changed (passcache.go); every scenario ends the same when every pass decides
// every queue.
func TestScenariosScopedLikeFull(t *testing.T) {
	eachScenario(t, func(t *testing.T, _, script string) {
		scoped := runScenario(t, script)
		full := runScenario(t, script, func(s *scenario) { s.l.passCache.touchAll() })
		if scoped != full {
			t.Errorf("scoped passes differ from full passes:\n%s", lineDiff(full, scoped))
		}
	})
}

// TestRandomScopedLikeFull drives the scenario ledger with random steps
// (workloads created in both queues of the cohort, some running unrecorded, passes, writes that
// land or conflict, workloads that run, stop, finish, are suspended or
// deleted, pods, priorities, quota changes) and wants the same from
// scoped passes as from passes that decide every queue.
func TestRandomScopedLikeFull(t *testing.T) {
	for seed := range 200 {
		scoped := randomScenario(t, uint64(seed), false)
		full := randomScenario(t, uint64(seed), true)
		if scoped != full {
			t.Fatalf("seed %d: scoped passes differ from full passes:\n%s", seed, lineDiff(full, scoped))
		}
	}
}

// randomScenario runs 60 random steps from seed; full has every pass
// decide every queue.
func randomScenario(t *testing.T, seed uint64, full bool) string {
	r := rand.New(rand.NewPCG(seed, 1))
	s := newScenario(t)
	pick := func(m map[string]bool) string {
		names := queues.SortedKeys(m)
		if len(names) == 0 {
			return ""
		}
		return names[r.IntN(len(names))]
	}
	for i := range 60 {
		objects, admissions := map[string]bool{}, map[string]bool{}
		for n := range s.objects {
			objects[n] = true
		}
		for n, w := range s.writes {
			if _, ok := s.objects[n]; !ok {
				continue
			}
			objects[n] = true
			if w.preemptor == nil && !w.late {
				admissions[n] = true
			}
		}
		var step []string
		switch k := r.IntN(20); {
		case k < 5 || len(objects) == 0:
			step = []string{"create", fmt.Sprintf("j%d", i), fmt.Sprintf("cpu=%d", 1+r.IntN(4)),
				"queue=" + []string{"q", "r"}[r.IntN(2)], fmt.Sprintf("prio=%d", 10*r.IntN(3))}
			if r.IntN(8) == 0 {
				step = append(step, "unrecorded")
			}
		case k < 10:
			step = []string{"pass"}
		case k < 12 && len(s.writes) > 0:
			writes := map[string]bool{}
			for n := range s.writes {
				if s.objects[n] != nil {
					writes[n] = true
				}
			}
			if n := pick(writes); n != "" {
				step = []string{"landed", n}
			} else {
				step = []string{"pass"}
			}
		case k == 12 && len(admissions) > 0:
			step = []string{"conflict", pick(admissions)}
		case k == 13:
			step = []string{"running", pick(objects)}
		case k == 14:
			step = []string{"finish", pick(objects)}
		case k == 15:
			step = []string{"stopped", pick(objects)}
		case k == 16:
			step = []string{"delete", pick(objects)}
		case k == 17:
			step = []string{"suspend", pick(objects)}
		case k == 18:
			step = []string{"priority", pick(objects), strconv.Itoa(10 * r.IntN(3))}
		default:
			step = []string{"quota", strconv.Itoa(2 + r.IntN(5))}
		}
		if len(step) > 1 && step[1] == "" || step[0] != "create" && step[0] != "pass" && step[0] != "quota" && s.objects[step[1]] == nil {
			step = []string{"pass"}
		}
		fmt.Fprintf(&s.out, "> %s\n", strings.Join(step, " "))
		s.step(step)
		s.report()
		if full {
			s.l.passCache.touchAll()
		}
		s.clock.Step(time.Second)
	}
	return s.out.String()
}
