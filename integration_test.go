package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/queues"
)

func TestIntegrationNamespaceLabel(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	managed := func(name string) (bool, string) {
		ns := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			return false, err.Error()
		}
		return ns.Labels[queues.LabelManaged] == "true", "labels: " + strings.Join(mapKV(ns.Labels), ",")
	}
	t.Run("the ledger repairs a namespace bound while tally was down", func(t *testing.T) {
		eventually(t, 10*time.Second, func() (bool, string) { return managed("early") })
	})
	t.Run("the webhook labels a namespace bound at creation", func(t *testing.T) {
		bindNamespace(t, "ns-label", "small")
		ok, why := managed("ns-label")
		if !ok {
			t.Fatalf("label not set at creation: %s", why)
		}
	})
	t.Run("unbinding removes the label", func(t *testing.T) {
		ns := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "ns-label"}, ns); err != nil {
			t.Fatal(err)
		}
		delete(ns.Annotations, queues.AnnotationNamespaceQueue)
		if err := k8s.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() (bool, string) { ok, why := managed("ns-label"); return !ok, why })
	})
	t.Run("an unknown ClusterQueue is denied with the known ones", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-bad", Annotations: map[string]string{queues.AnnotationNamespaceQueue: "nope"}}}
		err := k8s.Create(ctx, ns)
		if err == nil || !strings.Contains(err.Error(), `ClusterQueue "nope" is not defined; known ClusterQueues: accel, dra, drabench, drapods, finished, late, plugin, podmisplaced, podplace, podreplace, pods, poduncovered, prio, pytorch, selective, small, stat, tas, tasdra, tiny`) {
			t.Fatalf("want denial naming the known queues, got %v", err)
		}
	})
	t.Run("tally's own namespace is never managed", func(t *testing.T) {
		ns := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: tallyNS}, ns); err != nil {
			t.Fatal(err)
		}
		ns.Annotations = map[string]string{queues.AnnotationNamespaceQueue: "small"}
		if err := k8s.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
		// The Namespace webhooks never see tally's own namespace, so the
		// annotation is stored; what matters is that it is not labelled.
		// A binding of another namespace after it, repaired by the same
		// ledger loop, shows the loop has seen both.
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "barrier"}}); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "barrier"}, ns); err != nil {
			t.Fatal(err)
		}
		ns.Annotations = map[string]string{queues.AnnotationNamespaceQueue: "small"}
		if err := k8s.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() (bool, string) { return managed("barrier") })
		if ok, why := managed(tallyNS); ok {
			t.Fatalf("tally's own namespace was labelled managed: %s", why)
		}
	})
}

func mapKV(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func TestIntegrationMutation(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	bindManaged(t, "mut", "accel")

	job := newJob("mut", "train", "1")
	job.Spec.Template.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	job.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	userAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
	}}}
	job.Spec.Template.Spec.Affinity = userAffinity.DeepCopy()
	// Keep it pending: a Job that does not fit stays as the webhook left it.
	job.Spec.Parallelism = ptr32(5)
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatalf("create: %v", err)
	}
	got := getJob(t, "mut", "train")
	if got.Spec.Suspend == nil || !*got.Spec.Suspend {
		t.Errorf("suspend = %v, want true", got.Spec.Suspend)
	}
	if got.Labels[queues.LabelQueue] != "accel" {
		t.Errorf("queue label = %q, want accel", got.Labels[queues.LabelQueue])
	}
	if got.Labels[queues.LabelState] != "inadmissible" {
		t.Errorf("state = %q, want inadmissible (5 GPUs in a 4-GPU queue)", got.Labels[queues.LabelState])
	}

	fits := newJob("mut", "fits", "1")
	fits.Spec.Template.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	fits.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	fits.Spec.Template.Spec.Affinity = userAffinity.DeepCopy()
	fits.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpExists}}
	if err := k8s.Create(ctx, fits); err != nil {
		t.Fatalf("create: %v", err)
	}
	got = getJob(t, "mut", "fits")
	if got.Annotations[queues.AnnotationUserAffinity] == "" {
		t.Errorf("the user's affinity was not kept in %s", queues.AnnotationUserAffinity)
	}
	terms := queues.RequiredTerms(&got.Spec.Template.Spec)
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 2 || terms[0].MatchExpressions[0].Key != "zone" || terms[0].MatchExpressions[1].Key != "accel" {
		t.Errorf("required terms = %+v, want the user's zone term ANDed with accel=gpu", terms)
	}
	var keys []string
	for _, tol := range got.Spec.Template.Spec.Tolerations {
		keys = append(keys, tol.Key)
	}
	if strings.Join(keys, ",") != "other,gpu" {
		t.Errorf("tolerations = %v, want the Job's own plus the flavor's (other,gpu)", keys)
	}

	t.Run("a Job in an unbound namespace is untouched", func(t *testing.T) {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "free"}}); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, newJob("free", "plain", "1")); err != nil {
			t.Fatal(err)
		}
		got := getJob(t, "free", "plain")
		if got.Spec.Suspend != nil && *got.Spec.Suspend {
			t.Errorf("suspended a Job of an unbound namespace")
		}
		for k := range got.Labels {
			if strings.HasPrefix(k, "tally.dev/") {
				t.Errorf("label %s set on a Job of an unbound namespace", k)
			}
		}
	})
	t.Run("a Job that can never fit is created with a warning and an event", func(t *testing.T) {
		eventually(t, 10*time.Second, func() (bool, string) {
			return hasEvent(t, "mut", "train", "Inadmissible", "requests nvidia.com/gpu=5, ClusterQueue accel allows at most 4")
		})
	})
}

func TestIntegrationAdmission(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	bindManaged(t, "adm", "small")
	for _, n := range []string{"j1", "j2", "j3"} {
		if err := k8s.Create(ctx, newJob("adm", n, "1")); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	state := func(n string) string { return getJob(t, "adm", n).Labels[queues.LabelState] }
	// Created within one second, they are ordered by UID: any two fit.
	var admitted []string
	waiting := ""
	eventually(t, 10*time.Second, func() (bool, string) {
		admitted, waiting = nil, ""
		all := ""
		for _, n := range []string{"j1", "j2", "j3"} {
			switch s := state(n); s {
			case "admitted":
				admitted = append(admitted, n)
			case "pending":
				waiting = n
			default:
				all += n + "=" + s + " "
			}
		}
		return len(admitted) == 2 && waiting != "", fmt.Sprintf("admitted %v, pending %q, other %s", admitted, waiting, all)
	})
	first := getJob(t, "adm", admitted[0])
	if *first.Spec.Suspend || first.Annotations[queues.AnnotationFlavors] != "main=on-demand" || first.Annotations[queues.AnnotationAdmittedAt] == "" {
		t.Errorf("admitted job: suspend=%v annotations=%v", *first.Spec.Suspend, first.Annotations)
	}
	terms := queues.RequiredTerms(&first.Spec.Template.Spec)
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "tier" || terms[0].MatchExpressions[0].Values[0] != "on-demand" {
		t.Errorf("admitted affinity = %+v, want tier=on-demand", terms)
	}
	pendingRV := getJob(t, "adm", waiting).ResourceVersion
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, "adm", waiting, "Pending", "Waiting for quota: needs cpu=1 in flavor on-demand; ClusterQueue small uses 2 of 2")
	})
	if rv := getJob(t, "adm", waiting).ResourceVersion; rv != pendingRV {
		t.Errorf("a pending Job was written to: resourceVersion %s -> %s", pendingRV, rv)
	}

	complete(t, "adm", admitted[0])
	eventually(t, 10*time.Second, func() (bool, string) {
		s := state(admitted[0]) + "," + state(waiting)
		return s == "finished,admitted", "states " + s
	})
	for _, c := range []struct{ job, reason, text string }{
		{admitted[0], "Queued", "Queued in ClusterQueue small, position"},
		{admitted[0], "Admitted", "Admitted by ClusterQueue small in flavor on-demand (cpu=1)"},
		{admitted[0], "QuotaReleased", "Finished; released cpu=1 in flavor on-demand"},
		{waiting, "Admitted", "Admitted by ClusterQueue small in flavor on-demand"},
	} {
		eventually(t, 5*time.Second, func() (bool, string) { return hasEvent(t, "adm", c.job, c.reason, c.text) })
	}
	// Deleting an admitted Job frees its quota too.
	if err := k8s.Delete(ctx, getJob(t, "adm", admitted[1]), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, newJob("adm", "j4", "1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) { s := state("j4"); return s == "admitted", "j4 " + s })
}

// TestIntegrationAdmittedAskingNothing: a Job that asks for nothing its
// queue covers is charged nothing, and admitted kept to its queue's
// flavor's nodes all the same.
func TestIntegrationAdmittedAskingNothing(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	bindManaged(t, "nothing", "tiny") // flavor on-demand: tier=on-demand
	j := newJob("nothing", "idle", "1")
	j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	if err := k8s.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		j = getJob(t, "nothing", "idle")
		return !*j.Spec.Suspend, "Job idle, which asks for nothing, not admitted"
	})
	terms := queues.RequiredTerms(&j.Spec.Template.Spec)
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != "tier" || terms[0].MatchExpressions[0].Values[0] != "on-demand" {
		t.Errorf("admitted affinity = %+v, want tier=on-demand, the only flavor of queue tiny", terms)
	}
}

func TestIntegrationConfig(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: tallyNS, Name: "tally-config"}, cm); err != nil {
		t.Fatal(err)
	}
	bad := cm.DeepCopy()
	bad.Data[queues.ConfigKey] = strings.Replace(testConfig, "- name: on-demand\n", "- name: x\n", 1)
	err := k8s.Update(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), `ClusterQueue "small".spec.resourceGroups[0].flavors[0].name: flavor "x" is not defined`) {
		t.Fatalf("want the invalid config denied with its field path, got %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: tallyNS, Name: "tally-config"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data[queues.ConfigKey] != testConfig {
		t.Fatalf("the ConfigMap changed despite the denial")
	}
}

func ptr32(v int32) *int32 { return &v }

func TestIntegrationPreemption(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	bindManaged(t, "pre", "prio")
	state := func(n string) string { return getJob(t, "pre", n).Labels[queues.LabelState] }
	for _, n := range []string{"low-1", "low-2"} {
		j := newJob("pre", n, "1")
		j.Labels = map[string]string{queues.LabelPriorityClass: "low"}
		if err := k8s.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		s := state("low-1") + "," + state("low-2")
		return s == "admitted,admitted", s
	})
	high := newJob("pre", "high", "2")
	high.Labels = map[string]string{queues.LabelPriorityClass: "high"}
	if err := k8s.Create(ctx, high); err != nil {
		t.Fatal(err)
	}
	// With no job controller here, the victims have no pods, so their
	// quota is free as soon as they are suspended.
	eventually(t, 10*time.Second, func() (bool, string) {
		s := state("high") + "," + state("low-1") + "," + state("low-2")
		return s == "admitted,pending,pending", s
	})
	for _, n := range []string{"low-1", "low-2"} {
		if j := getJob(t, "pre", n); !*j.Spec.Suspend {
			t.Errorf("%s was not suspended", n)
		}
		eventually(t, 5*time.Second, func() (bool, string) {
			return hasEvent(t, "pre", n, "Preempted", "Preempted by pre/high (priority 1000 > 100) within ClusterQueue prio")
		})
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		return hasEvent(t, "pre", "high", "Preempting", "Preempting 2 jobs to fit: pre/low-")
	})
	// Admitted, a Job's affinity names its flavor only; once stopped, a
	// victim gets back the candidate affinity of both flavors.
	if got := tiers(getJob(t, "pre", "high")); got != "on-demand" {
		t.Errorf("admitted Job's affinity allows tiers %q, want on-demand", got)
	}
	for _, n := range []string{"low-1", "low-2"} {
		eventually(t, 10*time.Second, func() (bool, string) {
			got := tiers(getJob(t, "pre", n))
			return got == "on-demand|spot", n + " allows tiers " + got
		})
	}
	complete(t, "pre", "high")
	eventually(t, 10*time.Second, func() (bool, string) {
		s := state("low-1") + "," + state("low-2")
		return s == "admitted,admitted", "the victims were not re-admitted: " + s
	})
}

// tiers lists the tier values a Job's required node affinity allows, one
// per term, in order, joined by "|".
func tiers(j *batchv1.Job) string {
	var out []string
	for _, t := range queues.RequiredTerms(&j.Spec.Template.Spec) {
		for _, r := range t.MatchExpressions {
			if r.Key == "tier" {
				out = append(out, strings.Join(r.Values, ","))
			}
		}
	}
	return strings.Join(out, "|")
}

// tally status rebuilds the books from the API server: two Jobs admitted
// in queue stat (nominal 2 cpu), one waiting, one finished (not counted).
func TestIntegrationStatus(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	bindManaged(t, "stat", "stat")
	for _, n := range []string{"s-0", "s-1", "s-2", "s-3"} {
		if err := k8s.Create(ctx, newJob("stat", n, "1")); err != nil {
			t.Fatal(err)
		}
		if n == "s-0" {
			eventually(t, 10*time.Second, func() (bool, string) {
				s := getJob(t, "stat", n).Labels[queues.LabelState]
				return s == "admitted", s
			})
			complete(t, "stat", n)
		}
	}
	want := "stat  -  1  2  0  on-demand  cpu  2  2  0"
	eventually(t, 10*time.Second, func() (bool, string) {
		var out strings.Builder
		if err := inspect.ShowStatus(ctx, k8s, tallyNS, "", &out); err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Join(strings.Fields(line), "  ") == want {
				return true, ""
			}
		}
		return false, "no line " + want + " in:\n" + out.String()
	})
	var out strings.Builder
	if err := inspect.ShowStatus(ctx, k8s, "no-such-namespace", "", &out); err == nil || !strings.Contains(err.Error(), "reading the config") {
		t.Errorf("status without a config ConfigMap: err %v, want one about reading the config", err)
	}
}

// TestIntegrationWatchConfig: the informers' connections speak HTTP/1.1
// to the API server, which would speak HTTP/2 to the same config without
// watchConfig.
func TestIntegrationWatchConfig(t *testing.T) {
	needCluster(t)
	for _, tc := range []struct {
		cfg   *rest.Config
		proto string
	}{{envCfg, "HTTP/2.0"}, {watchConfig(envCfg), "HTTP/1.1"}} {
		h, err := rest.HTTPClientFor(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.Get(strings.TrimSuffix(tc.cfg.Host, "/") + "/version")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Proto != tc.proto {
			t.Errorf("GET /version: %s over %s, want 200 over %s", resp.Status, resp.Proto, tc.proto)
		}
	}
}
