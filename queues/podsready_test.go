package queues_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// kueueConfig is a Configuration document of the given apiVersion
// ("v1beta1" or "v1beta2"); body holds its fields.
func kueueConfig(version, body string) string {
	return "apiVersion: config.kueue.x-k8s.io/" + version + "\nkind: Configuration\n" + body
}

// kueueDefaults is what Kueue's v1beta1 defaults give for enable: true.
func kueueDefaults() *queues.PodsReady {
	return &queues.PodsReady{Timeout: 5 * time.Minute, RecoveryTimeout: 5 * time.Minute, BlockAdmission: true,
		Timestamp: queues.EvictionTimestamp, BackoffBase: 60 * time.Second, BackoffMax: time.Hour}
}

func podsReady(mod func(*queues.PodsReady)) *queues.PodsReady {
	p := kueueDefaults()
	mod(p)
	return p
}

func int32p(v int32) *int32 { return &v }

func TestParsePodsReady(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want *queues.PodsReady
	}{
		"no Configuration document: off": {
			in: queuestest.Flavor("default"),
		},
		"v1beta1 without waitForPodsReady: off": {
			in: kueueConfig("v1beta1", "manageJobsWithoutQueueName: false\n"),
		},
		"v1beta1 enable left out: off": {
			in: kueueConfig("v1beta1", "waitForPodsReady: {timeout: 10m}\n"),
		},
		"v1beta1 enable false: off": {
			in: kueueConfig("v1beta1", "waitForPodsReady: {enable: false, timeout: 10m}\n"),
		},
		"v1beta1 enable false: values are not checked, as in Kueue": {
			in: kueueConfig("v1beta1", "waitForPodsReady: {enable: false, timeout: -1m, requeuingStrategy: {timestamp: Never}}\n"),
		},
		"v1beta1 enable true: Kueue's v1beta1 defaults": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true}\n"),
			want: kueueDefaults(),
		},
		"timeout, and recoveryTimeout defaults to it": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, timeout: 90s}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.Timeout, p.RecoveryTimeout = 90*time.Second, 90*time.Second }),
		},
		"recoveryTimeout": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, timeout: 10m, recoveryTimeout: 3m}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.Timeout, p.RecoveryTimeout = 10*time.Minute, 3*time.Minute }),
		},
		"recoveryTimeout 0s turns it off": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, recoveryTimeout: 0s}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.RecoveryTimeout = 0 }),
		},
		"blockAdmission false": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, blockAdmission: false}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.BlockAdmission = false }),
		},
		"timestamp Creation": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, requeuingStrategy: {timestamp: Creation}}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.Timestamp = queues.CreationTimestamp }),
		},
		"backoffLimitCount": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, requeuingStrategy: {backoffLimitCount: 3}}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.BackoffLimitCount = int32p(3) }),
		},
		"backoffLimitCount 0: never requeued": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, requeuingStrategy: {backoffLimitCount: 0}}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.BackoffLimitCount = int32p(0) }),
		},
		"backoffLimitCount null: no limit": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, requeuingStrategy: {backoffLimitCount: null}}\n"),
			want: kueueDefaults(),
		},
		"backoff base and max": {
			in: kueueConfig("v1beta1", "waitForPodsReady: {enable: true, requeuingStrategy: {backoffBaseSeconds: 10, backoffMaxSeconds: 600}}\n"),
			want: podsReady(func(p *queues.PodsReady) {
				p.BackoffBase, p.BackoffMax = 10*time.Second, 10*time.Minute
			}),
		},
		"backoffMaxSeconds 0: uncapped, as in Kueue": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, requeuingStrategy: {backoffMaxSeconds: 0}}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.BackoffMax = 0 }),
		},
		"a base above the max is accepted, as in Kueue": {
			in: kueueConfig("v1beta1", "waitForPodsReady: {enable: true, requeuingStrategy: {backoffBaseSeconds: 120, backoffMaxSeconds: 60}}\n"),
			want: podsReady(func(p *queues.PodsReady) {
				p.BackoffBase, p.BackoffMax = 2*time.Minute, time.Minute
			}),
		},
		"featureGates.DisableWaitForPodsReady turns v1beta1 off": {
			in: kueueConfig("v1beta1", "waitForPodsReady: {enable: true}\nfeatureGates: {DisableWaitForPodsReady: true}\n"),
		},
		"v1beta2 without the section: on with Kueue's v1beta2 defaults": {
			in: kueueConfig("v1beta2", "integrations: {frameworks: [batch/job]}\n"),
			want: podsReady(func(p *queues.PodsReady) {
				p.Timeout, p.RecoveryTimeout, p.BlockAdmission = 30*time.Minute, 30*time.Minute, false
			}),
		},
		"v1beta2 timeout 0s: the default": {
			in: kueueConfig("v1beta2", "waitForPodsReady: {timeout: 0s}\n"),
			want: podsReady(func(p *queues.PodsReady) {
				p.Timeout, p.RecoveryTimeout, p.BlockAdmission = 30*time.Minute, 30*time.Minute, false
			}),
		},
		"v1beta2 fields": {
			in:   kueueConfig("v1beta2", "waitForPodsReady: {timeout: 5m, blockAdmission: true, requeuingStrategy: {backoffLimitCount: 2}}\n"),
			want: podsReady(func(p *queues.PodsReady) { p.BackoffLimitCount = int32p(2) }),
		},
		"featureGates.DisableWaitForPodsReady turns v1beta2 off": {
			in: kueueConfig("v1beta2", "waitForPodsReady: {timeout: 5m}\nfeatureGates: {DisableWaitForPodsReady: true}\n"),
		},
		"featureGates.DisableWaitForPodsReady false leaves it on": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true}\nfeatureGates: {DisableWaitForPodsReady: false}\n"),
			want: kueueDefaults(),
		},
		"next to other documents": {
			in:   queuestest.Stream(queuestest.Flavor("default"), kueueConfig("v1beta1", "waitForPodsReady: {enable: true}\n"), queuestest.ClusterQueue("q", queuestest.OneGroup)),
			want: kueueDefaults(),
		},
		// Kueue v0.14's config/components/manager/controller_manager_config.yaml,
		// with its waitForPodsReady block uncommented and enabled.
		"Kueue's shipped v1beta1 config": {
			in: kueueShippedV1beta1,
			want: podsReady(func(p *queues.PodsReady) {
				p.RecoveryTimeout, p.BlockAdmission = 3*time.Minute, false
			}),
		},
		// The example of Kueue's "Setup All-or-nothing with ready Pods" page
		// (site/content/en/docs/tasks/manage/setup_wait_for_pods_ready.md).
		"Kueue's waitForPodsReady docs example": {
			in: kueueConfig("v1beta2", `waitForPodsReady:
  timeout: 30m
  recoveryTimeout: 30m
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: 5
    backoffBaseSeconds: 60
    backoffMaxSeconds: 3600
`),
			want: podsReady(func(p *queues.PodsReady) {
				p.Timeout, p.RecoveryTimeout, p.BlockAdmission, p.BackoffLimitCount = 30*time.Minute, 30*time.Minute, false, int32p(5)
			}),
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, _, errs := queues.Parse([]byte(tc.in))
			if len(errs) > 0 {
				t.Fatalf("Parse: %v", queues.FormatErrors(errs))
			}
			if diff := cmp.Diff(tc.want, cfg.PodsReady); diff != "" {
				t.Errorf("PodsReady (-want +got):\n%s", diff)
			}
		})
	}
}

const kueueShippedV1beta1 = `apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
# enableClusterQueueResources: true
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 5
    LocalQueue.kueue.x-k8s.io: 1
    Cohort.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 1
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 50
  burst: 100
#pprofBindAddress: :8083
waitForPodsReady:
  enable: true
  timeout: 5m
  recoveryTimeout: 3m
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: null # null indicates infinite requeuing
    backoffBaseSeconds: 60
    backoffMaxSeconds: 3600
#manageJobsWithoutQueueName: true
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  - "ray.io/rayjob"
  - "ray.io/raycluster"
  - "jobset.x-k8s.io/jobset"
  - "kubeflow.org/paddlejob"
  - "kubeflow.org/pytorchjob"
  - "kubeflow.org/tfjob"
  - "kubeflow.org/xgboostjob"
  - "kubeflow.org/jaxjob"
  - "workload.codeflare.dev/appwrapper"
  - "trainer.kubeflow.org/trainjob"
`

func TestParsePodsReadyWarnings(t *testing.T) {
	const serveFlags = ": tally does not read this section; tally serve's command-line flags cover it"
	for name, tc := range map[string]struct {
		in   string
		want []string
	}{
		"only waitForPodsReady: none": {
			in: kueueConfig("v1beta1", "waitForPodsReady: {enable: true}\n"),
		},
		"each unused section, by its path": {
			in: kueueShippedV1beta1,
			want: []string{
				"Configuration.clientConnection" + serveFlags,
				"Configuration.controller" + serveFlags,
				"Configuration.health" + serveFlags,
				"Configuration.integrations: tally does not read this section; tally queues Jobs, its built-in kinds (JobSet, Kubeflow jobs, MPIJob, RayJob, TrainJob, Pods) and the kinds WorkloadKind documents declare",
				"Configuration.leaderElection" + serveFlags,
				"Configuration.metrics" + serveFlags,
				"Configuration.webhook" + serveFlags,
			},
		},
		"namespace management and fair sharing, with tally's equivalents": {
			in: kueueConfig("v1beta1", "manageJobsWithoutQueueName: true\nfairSharing: {enable: true}\nmultiKueue: {gcInterval: 1m}\n"),
			want: []string{
				"Configuration.fairSharing: tally does not read this section; fair sharing is on for a tree of cohorts when one of its ClusterQueues or Cohorts has spec.fairSharing, with both preemption strategies",
				"Configuration.manageJobsWithoutQueueName: tally does not read this section; in tally, a namespace bound by the tally.dev/cluster-queue annotation, or with a LocalQueue named default, queues its Jobs that have no queue label",
				"Configuration.multiKueue: tally does not read this section",
			},
		},
		"an unknown field of waitForPodsReady": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {enable: true, timout: 5m, requeuingStrategy: {backoffLimit: 3}}\n"),
			want: []string{"Configuration.waitForPodsReady.requeuingStrategy.backoffLimit: unknown field, ignored", "Configuration.waitForPodsReady.timout: unknown field, ignored"},
		},
		"feature gates other than DisableWaitForPodsReady": {
			in:   kueueConfig("v1beta1", "featureGates: {TopologyAwareScheduling: true, DisableWaitForPodsReady: false, LocalQueueMetrics: true}\n"),
			want: []string{"Configuration.featureGates[LocalQueueMetrics]: tally does not read this feature gate", "Configuration.featureGates[TopologyAwareScheduling]: tally does not read this feature gate"},
		},
		"v1beta2 without the section says it is on": {
			in:   kueueConfig("v1beta2", ""),
			want: []string{"Configuration.waitForPodsReady: left out, so on with Kueue's v1beta2 defaults (timeout 30m); set featureGates.DisableWaitForPodsReady: true to turn it off"},
		},
		"v1beta2 turned off by the gate: nothing to say": {
			in: kueueConfig("v1beta2", "featureGates: {DisableWaitForPodsReady: true}\n"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, warnings, errs := queues.Parse([]byte(tc.in))
			if len(errs) > 0 {
				t.Fatalf("Parse: %v", queues.FormatErrors(errs))
			}
			if diff := cmp.Diff(tc.want, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(warnings, cfg.Warnings); diff != "" {
				t.Errorf("Config.Warnings differ from the returned warnings (-returned +Config):\n%s", diff)
			}
		})
	}
}

func TestParsePodsReadyErrors(t *testing.T) {
	on := func(fields string) string {
		return kueueConfig("v1beta1", "waitForPodsReady:\n  enable: true\n"+fields)
	}
	for name, tc := range map[string]struct {
		in   string
		want []string
	}{
		"negative timeout": {
			in:   on("  timeout: -5m\n"),
			want: []string{`Configuration.waitForPodsReady.timeout: must not be negative`},
		},
		"v1beta1 timeout 0s": {
			in:   on("  timeout: 0s\n"),
			want: []string{"Configuration.waitForPodsReady.timeout: must be more than 0"},
		},
		"negative recoveryTimeout": {
			in:   on("  recoveryTimeout: -1s\n"),
			want: []string{`Configuration.waitForPodsReady.recoveryTimeout: must not be negative; 0s turns it off`},
		},
		"a duration that does not parse": {
			in:   on("  timeout: 5 minutes\n"),
			want: []string{`Configuration.waitForPodsReady.timeout: "5 minutes" is not a duration such as 5m or 90s`},
		},
		"a duration that does not parse, even when off": {
			in:   kueueConfig("v1beta1", "waitForPodsReady: {recoveryTimeout: soon}\n"),
			want: []string{`Configuration.waitForPodsReady.recoveryTimeout: "soon" is not a duration such as 5m or 90s`},
		},
		"a duration written as a number": {
			in:   on("  timeout: 300\n"),
			want: []string{"Configuration.waitForPodsReady.timeout: must be a string, not a number; quote it"},
		},
		"an unknown timestamp": {
			in:   on("  requeuingStrategy: {timestamp: Admission}\n"),
			want: []string{`Configuration.waitForPodsReady.requeuingStrategy.timestamp: unsupported value "Admission": must be one of Eviction, Creation`},
		},
		"negative backoffLimitCount": {
			in:   on("  requeuingStrategy: {backoffLimitCount: -1}\n"),
			want: []string{"Configuration.waitForPodsReady.requeuingStrategy.backoffLimitCount: must not be negative"},
		},
		"negative backoff seconds": {
			in: on("  requeuingStrategy: {backoffBaseSeconds: -1, backoffMaxSeconds: -2}\n"),
			want: []string{
				"Configuration.waitForPodsReady.requeuingStrategy.backoffBaseSeconds: must not be negative",
				"Configuration.waitForPodsReady.requeuingStrategy.backoffMaxSeconds: must not be negative",
			},
		},
		"backoffBaseSeconds beyond int32": {
			in:   on("  requeuingStrategy: {backoffBaseSeconds: 3000000000}\n"),
			want: []string{"Configuration.waitForPodsReady.requeuingStrategy.backoffBaseSeconds: must be an integer, not a number"},
		},
		"v1beta2 has no enable": {
			in: kueueConfig("v1beta2", "waitForPodsReady: {enable: false}\n"),
			want: []string{"Configuration.waitForPodsReady.enable: v1beta2 has no enable field: the section is on by itself; " +
				"use featureGates.DisableWaitForPodsReady: true to turn it off"},
		},
		"v1beta2 negative timeout": {
			in:   kueueConfig("v1beta2", "waitForPodsReady: {timeout: -1m}\n"),
			want: []string{`Configuration.waitForPodsReady.timeout: must not be negative`},
		},
		"two Configuration documents": {
			in:   queuestest.Stream(kueueConfig("v1beta1", ""), queuestest.Flavor("default"), kueueConfig("v1beta1", "")),
			want: []string{"Configuration: a config holds at most one Configuration document: there is one in document[0] and another in document[2]"},
		},
		"Kueue's API group instead of its config group": {
			in: "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Configuration\n",
			want: []string{`document[0].apiVersion: unsupported apiVersion "kueue.x-k8s.io/v1beta1" for kind Configuration: ` +
				"must be one of config.kueue.x-k8s.io/v1beta1, config.kueue.x-k8s.io/v1beta2"},
		},
		"no apiVersion": {
			in:   "kind: Configuration\n",
			want: []string{"document[0].apiVersion: is required: one of config.kueue.x-k8s.io/v1beta1, config.kueue.x-k8s.io/v1beta2"},
		},
		"the config group for another kind": {
			in: "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: a}\n",
			want: []string{`document[0].apiVersion: unsupported apiVersion "config.kueue.x-k8s.io/v1beta1": ` +
				"must be one of tally.dev/v1, kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2"},
		},
		"an invalid Configuration refuses the whole config": {
			in:   queuestest.Stream(queuestest.Flavor("default"), on("  timeout: -1s\n")),
			want: []string{`Configuration.waitForPodsReady.timeout: must not be negative`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, _, errs := queues.Parse([]byte(tc.in))
			if cfg != nil {
				t.Errorf("Parse returned a Config despite errors")
			}
			if diff := cmp.Diff(tc.want, queues.FormatErrors(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFilesTwoConfigurations(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, []byte(kueueConfig("v1beta1", "waitForPodsReady: {enable: true}\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, _, errs := queues.ParseFiles(a, b)
	want := []string{b + ": Configuration: a config holds at most one Configuration document: there is one in " +
		a + " document[0] and another in " + b + " document[0]"}
	if diff := cmp.Diff(want, queues.FormatErrors(errs)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestPodsReadyBackoff(t *testing.T) {
	defaults := kueueDefaults()
	for name, tc := range map[string]struct {
		p    *queues.PodsReady
		n    int32
		want time.Duration
	}{
		"first requeue: the base":    {p: defaults, n: 1, want: time.Minute},
		"second: twice the base":     {p: defaults, n: 2, want: 2 * time.Minute},
		"sixth: base·2^5":            {p: defaults, n: 6, want: 32 * time.Minute},
		"seventh: capped at the max": {p: defaults, n: 7, want: time.Hour},
		"far on: still the max":      {p: defaults, n: 1 << 30, want: time.Hour},
		"n 0: no wait":               {p: defaults, n: 0, want: 0},
		"negative n: no wait":        {p: defaults, n: -3, want: 0},
		"base 0: never waits": {
			p: podsReady(func(p *queues.PodsReady) { p.BackoffBase = 0 }), n: 1 << 30, want: 0,
		},
		"max exactly reached": {
			p: podsReady(func(p *queues.PodsReady) { p.BackoffBase, p.BackoffMax = 15*time.Second, time.Minute }), n: 3, want: time.Minute,
		},
		"base above the max: the first is the base, as in Kueue": {
			p: podsReady(func(p *queues.PodsReady) { p.BackoffBase, p.BackoffMax = 2*time.Minute, time.Minute }), n: 1, want: 2 * time.Minute,
		},
		"base above the max: later ones the max": {
			p: podsReady(func(p *queues.PodsReady) { p.BackoffBase, p.BackoffMax = 2*time.Minute, time.Minute }), n: 2, want: time.Minute,
		},
		"max 0: uncapped": {
			p: podsReady(func(p *queues.PodsReady) { p.BackoffMax = 0 }), n: 11, want: 1024 * time.Minute,
		},
		"max 0, far on: Kueue's own cap, MaxInt64/2": {
			p: podsReady(func(p *queues.PodsReady) { p.BackoffMax = 0 }), n: 1000, want: time.Duration(1<<63-1) / 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.p.Backoff(tc.n); got != tc.want {
				t.Errorf("Backoff(%d) = %v, want %v", tc.n, got, tc.want)
			}
		})
	}
}

// TestPodsReadyQueueOrder: a workload evicted because its pods were not
// ready in time is ordered in its queue by that eviction under
// requeuingStrategy.timestamp Eviction (the default, also with
// waitForPodsReady off), by its creation under Creation, and by its
// creation again once admitted since.
func TestPodsReadyQueueOrder(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	job := func(name string, created time.Duration, ann map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(t0.Add(created)), Annotations: ann}}
	}
	// a, created first, was admitted at 1m and evicted at 2m; b was
	// created in between, c after the eviction.
	requeued := map[string]string{queues.AnnotationAdmittedAt: at(time.Minute), queues.AnnotationEvictedAt: at(2 * time.Minute)}
	b, c := job("b", 90*time.Second, nil), job("c", 3*time.Minute, nil)
	eviction := podsReady(func(p *queues.PodsReady) { p.Timestamp = queues.EvictionTimestamp })
	creation := podsReady(func(p *queues.PodsReady) { p.Timestamp = queues.CreationTimestamp })
	unset := podsReady(func(p *queues.PodsReady) { p.Timestamp = "" })
	for name, tc := range map[string]struct {
		p       *queues.PodsReady
		ann     map[string]string
		evicted time.Time
		want    string
	}{
		"Eviction: behind b, ahead of c":       {p: eviction, ann: requeued, evicted: t0.Add(2 * time.Minute), want: "b a c"},
		"unset: Eviction":                      {p: unset, ann: requeued, evicted: t0.Add(2 * time.Minute), want: "b a c"},
		"waitForPodsReady off: Eviction":       {p: nil, ann: requeued, evicted: t0.Add(2 * time.Minute), want: "b a c"},
		"Creation: it keeps its place":         {p: creation, ann: requeued, evicted: t0.Add(2 * time.Minute), want: "a b c"},
		"never evicted for it: by creation":    {p: eviction, ann: map[string]string{queues.AnnotationAdmittedAt: at(time.Minute)}, want: "a b c"},
		"admitted again since: by creation":    {p: eviction, ann: map[string]string{queues.AnnotationAdmittedAt: at(150 * time.Second), queues.AnnotationEvictedAt: at(2 * time.Minute)}, want: "a b c"},
		"evicted in the second of admission":   {p: eviction, ann: map[string]string{queues.AnnotationAdmittedAt: at(2 * time.Minute), queues.AnnotationEvictedAt: at(2 * time.Minute)}, evicted: t0.Add(2 * time.Minute), want: "b a c"},
		"an eviction time that does not parse": {p: eviction, ann: map[string]string{queues.AnnotationEvictedAt: "yesterday"}, want: "a b c"},
	} {
		t.Run(name, func(t *testing.T) {
			a := queues.WorkloadFromJob(job("a", 0, tc.ann), "q", 0)
			if !a.Evicted.Equal(tc.evicted) {
				t.Fatalf("Evicted = %v, want %v", a.Evicted, tc.evicted)
			}
			ws := []*queues.Workload{tc.p.Order(a), queues.WorkloadFromJob(c, "q", 0), queues.WorkloadFromJob(b, "q", 0)}
			// Unsealed copies must sort alike.
			for _, w := range slices.Clone(ws) {
				u := queues.Workload{Name: w.Name + "'", UID: w.UID + "'", Created: w.Created, Evicted: w.Evicted, ByCreation: w.ByCreation}
				ws = append(ws, &u)
			}
			slices.SortFunc(ws, func(x, y *queues.Workload) int {
				if queues.Before(x, y) {
					return -1
				}
				return 1
			})
			var got []string
			for _, w := range ws {
				if !strings.HasSuffix(w.Name, "'") {
					got = append(got, w.Name)
				}
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("order %q, want %q", g, tc.want)
			}
			for i := 0; i+1 < len(ws); i += 2 {
				if ws[i].Name+"'" != ws[i+1].Name {
					t.Errorf("sealed %s and unsealed %s do not sort together", ws[i].Name, ws[i+1].Name)
				}
			}
		})
	}
}

// TestPodsReadyOrderCopies: Order leaves w as it is when nothing changes,
// and copies it (w untouched) when it does.
func TestPodsReadyOrderCopies(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	early := queues.WorkloadFromJob(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "e", CreationTimestamp: metav1.NewTime(t0.Add(time.Hour)),
		Annotations: map[string]string{queues.AnnotationEvictedAt: t0.Format(time.RFC3339)}}}, "q", 0)
	if !early.Evicted.IsZero() || !early.QueueTime().Equal(t0.Add(time.Hour)) {
		t.Errorf("an eviction time before the creation: Evicted %v, QueueTime %v; want neither to pass it", early.Evicted, early.QueueTime())
	}
	plain := queues.WorkloadFromJob(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(t0)}}, "q", 0)
	creation := podsReady(func(p *queues.PodsReady) { p.Timestamp = queues.CreationTimestamp })
	if creation.Order(plain) != plain {
		t.Error("a workload never evicted for pods not ready was copied")
	}
	w := queues.WorkloadFromJob(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: metav1.NewTime(t0),
		Annotations: map[string]string{queues.AnnotationEvictedAt: t0.Add(time.Hour).Format(time.RFC3339)}}}, "q", 0)
	if (*queues.PodsReady)(nil).Order(w) != w || !w.QueueTime().Equal(t0.Add(time.Hour)) {
		t.Fatalf("by default: QueueTime %v, want the eviction", w.QueueTime())
	}
	byCreation := creation.Order(w)
	if byCreation == w || !byCreation.ByCreation || !byCreation.QueueTime().Equal(t0) || w.ByCreation {
		t.Errorf("Creation: copy %v ByCreation %v QueueTime %v; original ByCreation %v", byCreation != w, byCreation.ByCreation, byCreation.QueueTime(), w.ByCreation)
	}
	if back := kueueDefaults().Order(byCreation); back == byCreation || !back.QueueTime().Equal(t0.Add(time.Hour)) || !queues.Before(byCreation, back) {
		t.Errorf("Eviction again: QueueTime %v", back.QueueTime())
	}
}
