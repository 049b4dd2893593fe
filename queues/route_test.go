package queues_test

import (
	"strings"
	"testing"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// routeConfig has two ClusterQueues and LocalQueues in two namespaces:
// team-a has no LocalQueue named default, team-b has one.
var routeConfig = queuestest.New().Flavor("f").
	ClusterQueue("cq-a", "namespaceSelector: {}").Group("cpu").Quotas("f", "cpu=1").
	ClusterQueue("cq-b", "namespaceSelector: {}").Group("cpu").Quotas("f", "cpu=1").
	LocalQueue("team-a", "team-a-queue", "cq-a").
	LocalQueue("team-a", "other", "cq-b").
	LocalQueue("team-b", "default", "cq-b").String()

func parseRouteConfig(t *testing.T) *queues.Config {
	t.Helper()
	cfg, _, errs := queues.Parse([]byte(routeConfig))
	if len(errs) > 0 {
		t.Fatalf("config: %v", errs)
	}
	return cfg
}

func TestRoute(t *testing.T) {
	cfg := parseRouteConfig(t)
	qn := func(name string) map[string]string { return map[string]string{queues.LabelKueueQueueName: name} }
	for _, tc := range []struct {
		name        string
		cfg         *queues.Config
		ns, ann     string
		labels      map[string]string
		want, error string
	}{
		{name: "queue-name picks the LocalQueue", cfg: cfg, ns: "team-a", labels: qn("team-a-queue"), want: "cq-a"},
		{name: "queue-name wins over the annotation", cfg: cfg, ns: "team-a", ann: "cq-b", labels: qn("team-a-queue"), want: "cq-a"},
		{name: "queue-name wins over the cluster-queue label", cfg: cfg, ns: "team-a",
			labels: map[string]string{queues.LabelKueueQueueName: "other", queues.LabelQueue: "cq-a"}, want: "cq-b"},
		{name: "unknown queue-name lists the namespace's LocalQueues", cfg: cfg, ns: "team-a", labels: qn("nope"),
			error: `metadata.labels[kueue.x-k8s.io/queue-name]: LocalQueue "nope" does not exist in namespace team-a; its LocalQueues: other, team-a-queue`},
		{name: "unknown queue-name never falls back to the annotation", cfg: cfg, ns: "team-c", ann: "cq-a", labels: qn("nope"),
			error: `metadata.labels[kueue.x-k8s.io/queue-name]: LocalQueue "nope" does not exist in namespace team-c; it has none`},
		{name: "a LocalQueue of another namespace is unknown", cfg: cfg, ns: "team-b", labels: qn("team-a-queue"),
			error: `LocalQueue "team-a-queue" does not exist in namespace team-b; its LocalQueues: default`},
		{name: "queue-name before any config", ns: "team-a", ann: "cq-a", labels: qn("team-a-queue"),
			error: `tally has not loaded a valid config yet`},
		{name: "cluster-queue label names the ClusterQueue", cfg: cfg, ns: "team-a", ann: "cq-a",
			labels: map[string]string{queues.LabelQueue: "cq-b"}, want: "cq-b"},
		{name: "cluster-queue label names the annotation's ClusterQueue", cfg: cfg, ns: "team-c", ann: "cq-a",
			labels: map[string]string{queues.LabelQueue: "cq-a"}, want: "cq-a"},
		{name: "cluster-queue label names a LocalQueue's ClusterQueue", cfg: cfg, ns: "team-b",
			labels: map[string]string{queues.LabelQueue: "cq-b"}, want: "cq-b"},
		{name: "cluster-queue label names another team's ClusterQueue", cfg: cfg, ns: "team-b",
			labels: map[string]string{queues.LabelQueue: "cq-a"},
			error:  `metadata.labels[tally.dev/cluster-queue]: namespace team-b may not use ClusterQueue "cq-a"; it may use: cq-b`},
		{name: "cluster-queue label, annotated namespace, another queue", cfg: cfg, ns: "team-c", ann: "cq-b",
			labels: map[string]string{queues.LabelQueue: "cq-a"},
			error:  `namespace team-c may not use ClusterQueue "cq-a"; it may use: cq-b`},
		{name: "cluster-queue label in a namespace bound to nothing", cfg: cfg, ns: "team-c",
			labels: map[string]string{queues.LabelQueue: "cq-a"},
			error:  `namespace team-c may not use ClusterQueue "cq-a": it is bound to no ClusterQueue`},
		{name: "cluster-queue label naming the annotation's queue before any config", ns: "team-c", ann: "cq-a",
			labels: map[string]string{queues.LabelQueue: "cq-a"}, want: "cq-a"},
		{name: "cluster-queue label naming another queue before any config", ns: "team-c", ann: "cq-a",
			labels: map[string]string{queues.LabelQueue: "cq-b"}, error: `tally has not loaded a valid config yet`},
		{name: "the annotation", cfg: cfg, ns: "team-a", ann: "cq-b", want: "cq-b"},
		{name: "the annotation wins over the default LocalQueue", cfg: cfg, ns: "team-b", ann: "cq-a", want: "cq-a"},
		{name: "the default LocalQueue", cfg: cfg, ns: "team-b", want: "cq-b"},
		{name: "LocalQueues but no default: not queued", cfg: cfg, ns: "team-a", want: ""},
		{name: "neither annotation nor LocalQueue: not queued", cfg: cfg, ns: "team-c", want: ""},
		{name: "annotation before any config", ns: "team-a", ann: "cq-a", want: "cq-a"},
		{name: "nothing before any config", ns: "team-a", want: ""},
		{name: "an empty queue-name is no queue-name", cfg: cfg, ns: "team-b", labels: qn(""), want: "cq-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.Route(tc.ns, tc.ann, tc.labels)
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("Route = %q, %v; want error containing %q", got, err, tc.error)
				}
				if got != "" {
					t.Errorf("Route returned queue %q with its error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Route = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestManaged(t *testing.T) {
	cfg := parseRouteConfig(t)
	for _, tc := range []struct {
		cfg       *queues.Config
		ns, ann   string
		want      bool
		condition string
	}{
		{cfg, "team-a", "", true, "named by a LocalQueue"},
		{cfg, "team-b", "", true, "named by a default LocalQueue"},
		{cfg, "team-c", "", false, "neither annotated nor named"},
		{cfg, "team-c", "cq-a", true, "annotated"},
		{nil, "team-a", "", false, "no config: LocalQueues unknown"},
		{nil, "team-a", "cq-a", true, "no config, annotated"},
		{cfg, "kube-system", "cq-a", false, "kube-system"},
		{cfg, "tally-system", "cq-a", false, "tally's own namespace"},
	} {
		if got := queues.Managed(tc.cfg, tc.ns, tc.ann, "tally-system"); got != tc.want {
			t.Errorf("%s: Managed(%s, %q) = %v, want %v", tc.condition, tc.ns, tc.ann, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cfg       *queues.Config
		ns        string
		has, want bool
		condition string
	}{
		{cfg, "team-a", false, true, "named by a LocalQueue, unlabelled"},
		{cfg, "team-c", true, false, "a forged label under a config"},
		{nil, "team-c", true, true, "a label before any config is kept"},
		{nil, "team-c", false, false, "no label before any config"},
		{nil, "kube-system", true, true, "before any config even kube-system's label stays, for the ledger to settle"},
	} {
		if got := queues.WantsManagedLabel(tc.cfg, tc.ns, "", "tally-system", tc.has); got != tc.want {
			t.Errorf("%s: WantsManagedLabel(%s, has %v) = %v, want %v", tc.condition, tc.ns, tc.has, got, tc.want)
		}
	}
	if got := cfg.LocalQueuesIn("team-a"); len(got) != 2 || got[0] != "other" || got[1] != "team-a-queue" {
		t.Errorf("LocalQueuesIn(team-a) = %v, want [other team-a-queue]", got)
	}
}
