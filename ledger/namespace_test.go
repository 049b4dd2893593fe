package ledger

import (
	"testing"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// lqConfig binds namespace lq-ns by a LocalQueue named default and
// namespace lq-only by a LocalQueue of another name; without LocalQueues
// it is the ClusterQueue alone.
func lqConfig(withLocalQueues bool) []byte {
	c := queuestest.New().Flavor("default").
		ClusterQueue("cq", "namespaceSelector: {}").Group("cpu").Quotas("default", "cpu=4")
	if withLocalQueues {
		c.LocalQueue("lq-ns", "default", "cq").LocalQueue("lq-only", "named", "cq")
	}
	return c.Bytes()
}

func parseLQConfig(t *testing.T) *queues.Config {
	t.Helper()
	cfg, _, errs := queues.Parse(lqConfig(true))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return cfg
}

func namespace(name string, labels, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
}

// queuedNamespaces drains the namespace label queue.
func queuedNamespaces(l *Ledger) map[string]bool {
	out := map[string]bool{}
	for l.labels.namespaces.Len() > 0 {
		n, _ := l.labels.namespaces.Get()
		out[n] = true
		l.labels.namespaces.Done(n)
		l.labels.namespaces.Forget(n)
	}
	return out
}

// A namespace named by a LocalQueue is managed: its label is queued for
// repair when it lacks it, and again when a config reload adds or removes
// its LocalQueue.
func TestNamespacesManagedByLocalQueues(t *testing.T) {
	l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{Namespace: "tally-system"})
	cfg := parseLQConfig(t)
	l.cfg = cfg
	managed := map[string]string{queues.LabelManaged: "true"}
	l.onNamespace(namespace("lq-ns", nil, nil))
	l.onNamespace(namespace("lq-only", managed, nil))
	l.onNamespace(namespace("plain", nil, nil))
	l.onNamespace(namespace("annotated", managed, map[string]string{queues.AnnotationNamespaceQueue: "cq"}))
	l.onNamespace(namespace("kube-system", managed, nil))
	if got := queuedNamespaces(l); len(got) != 2 || !got["lq-ns"] || !got["kube-system"] {
		t.Errorf("namespaces queued for a label repair: %v, want lq-ns (to label) and kube-system (to unlabel)", got)
	}
	for name, want := range map[string]bool{"lq-ns": true, "lq-only": true, "plain": false, "annotated": true, "kube-system": false} {
		if got := l.managedLocked(name, l.namespaces[name]); got != want {
			t.Errorf("managed(%s) = %v, want %v", name, got, want)
		}
	}

	// A config without the LocalQueues: lq-only loses its label, the
	// annotated namespace keeps its own.
	bare, _, errs := queues.Parse(lqConfig(false))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	l.reconfigure(bare)
	if got := queuedNamespaces(l); len(got) != 2 || !got["lq-only"] || !got["kube-system"] {
		t.Errorf("after a reload without LocalQueues, queued: %v, want lq-only and kube-system", got)
	}
	l.reconfigure(cfg)
	if got := queuedNamespaces(l); len(got) != 2 || !got["lq-ns"] || !got["kube-system"] {
		t.Errorf("after a reload with them again, queued: %v, want lq-ns and kube-system", got)
	}
}

// Late capture routes a running unrecorded Job as the webhook would have:
// through its LocalQueue, or the namespace's default one; a Job that names
// an unknown LocalQueue, or no queue where none applies, is not tally's.
func TestLateCaptureRoutesLikeTheWebhook(t *testing.T) {
	l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{Namespace: "tally-system"})
	l.cfg = parseLQConfig(t)
	// Seen before the ledger synced: no capture of the namespaces' Jobs
	// from the (absent) cache is started.
	l.onNamespace(namespace("lq-ns", nil, nil))
	l.onNamespace(namespace("lq-only", nil, nil))
	l.onNamespace(namespace("plain", nil, nil))
	l.synced = true
	running := func(ns, name string, labels map[string]string) *batchv1.Job {
		j := benchJob(0, 1, false)
		j.Namespace, j.Name, j.UID, j.Labels = ns, name, types.UID(ns+"/"+name), labels
		j.Spec.Suspend = ptr.To(false)
		return j
	}
	qn := func(name string) map[string]string { return map[string]string{queues.LabelKueueQueueName: name} }
	for _, tc := range []struct {
		job   *batchv1.Job
		queue string // "": not captured
	}{
		{running("lq-ns", "default-lq", nil), "cq"},
		{running("lq-only", "named-lq", qn("named")), "cq"},
		{running("lq-only", "no-queue", nil), ""},
		{running("lq-only", "unknown-lq", qn("nope")), ""},
		{running("plain", "unmanaged", qn("named")), ""},
	} {
		l.onJob(tc.job)
		e := l.late[tc.job.UID]
		switch {
		case tc.queue == "" && e != nil:
			t.Errorf("%s/%s captured into %s, want it left alone", tc.job.Namespace, tc.job.Name, e.W.Queue)
		case tc.queue != "" && e == nil:
			t.Errorf("%s/%s not captured, want it in %s", tc.job.Namespace, tc.job.Name, tc.queue)
		case tc.queue != "" && e.W.Queue != tc.queue:
			t.Errorf("%s/%s captured into %s, want %s", tc.job.Namespace, tc.job.Name, e.W.Queue, tc.queue)
		}
	}
}
