package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// The operators of JobSets, MPIJobs and RayJobs (e2e/cluster/jobset.sh,
// mpi-operator.sh, ray-operator.sh), each built into the toolchain the
// first time, run on the suite's cluster and work there: in a namespace
// tally does not manage, each makes the children of a workload, runs it
// to its end on the simulated nodes, and deletes and makes again the
// workload's pods when it is suspended and resumed. What each does is
// spelled out in its subtest.
func TestOperators(t *testing.T) {
	s := setup(t)
	// A cold build of each operator takes some minutes.
	build := testContext(t, 30*time.Minute)
	for _, name := range []string{framework.JobSetController, framework.MPIOperator, framework.RayOperator} {
		if err := s.env.BuildTool(build, name); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t, 12*time.Minute)
	const ns = "e2e-operators"
	if err := framework.CreateNamespace(ctx, s.client, ns, ""); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The operators log beside tally, kept when the suite fails.
	dir := filepath.Dir(s.cluster.Kubeconfig)

	t.Run("JobSet", func(t *testing.T) { testJobSetController(ctx, t, s, ns, dir) })
	t.Run("MPIJob", func(t *testing.T) { testMPIOperator(ctx, t, s, ns, dir) })
	t.Run("RayJob", func(t *testing.T) { testRayOperator(ctx, t, s, ns, dir) })
}

// startOperator starts o, waits until it is ready and stops it when the
// test ends.
func startOperator(ctx context.Context, t *testing.T, o *framework.Operator, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping %s: %v", o.Name, err)
		}
	})
	if err := o.WaitReady(ctx, timeout); err != nil {
		t.Fatalf("%s is not ready: %v", o.Name, err)
	}
	t.Logf("%s ready in %s (log %s)", o.Name, time.Since(start).Round(time.Millisecond), o.Log)
}

// JobSet's controller makes a child Job per replica of each replicated
// Job (here one, <jobset>-workers-0) and a headless Service named after
// the JobSet; the Job makes the pods, which finish on the simulated
// nodes, so the Job completes and the JobSet gets Completed=True
// (terminalState Completed). Its webhook defaults what the JobSet leaves
// out (completionMode Indexed, successPolicy, network). Suspended, the
// JobSet keeps its Job (the same object) and suspends it, so the Job
// controller deletes the pods; Suspended=True (reason SuspendedJobs).
// Resumed, it un-suspends the same Job, which makes new pods;
// Suspended=False (reason ResumeJobs). Created suspended, its Job is
// created suspended and no pod is made.
func testJobSetController(ctx context.Context, t *testing.T, s *suite, ns, dir string) {
	if err := s.cluster.InstallJobSetCRD(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := framework.NewJobSetController(ctx, s.cluster, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The webhooks fail closed; without the controller they would
		// refuse every JobSet.
		if err := framework.RemoveJobSetWebhooks(context.Background(), s.client); err != nil {
			t.Errorf("removing JobSet's webhooks: %v", err)
		}
	})
	startOperator(ctx, t, o, 2*time.Minute)

	t.Run("runs to Completed", func(t *testing.T) {
		start := time.Now()
		js := framework.OperatorJob{Namespace: ns, Name: "js", Workers: 2, Runtime: 3 * time.Second}.JobSet()
		if err := s.client.Create(ctx, js); err != nil {
			t.Fatal(err)
		}
		checkJobSetDefaults(t, js)
		job := opWaitJob(ctx, t, s, ns, "js-workers-0", "JobSet", "js", time.Minute)
		pods := opWaitPods(ctx, t, s, ns, job, 2, corev1.PodRunning, time.Minute)
		t.Logf("%d pods running %s after create: %v", len(pods), time.Since(start).Round(time.Millisecond), opPodNames(pods))
		opWaitPods(ctx, t, s, ns, job, 2, corev1.PodSucceeded, time.Minute)
		u := opWaitObject(ctx, t, s, framework.JobSetGVK, ns, "js", "JobSet Completed=True", time.Minute, func(u *unstructured.Unstructured) bool {
			return framework.ConditionStatus(u, "Completed") == "True"
		})
		state, _, _ := unstructured.NestedString(u.Object, "status", "terminalState")
		t.Logf("Completed %s after create; terminalState %q; conditions %s", time.Since(start).Round(time.Millisecond), state, framework.Conditions(u))
		if state != "Completed" {
			t.Errorf("terminalState %q, want Completed", state)
		}
		svc := &corev1.Service{}
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "js"}, svc); err != nil {
			t.Errorf("the JobSet's headless Service: %v", err)
		}
	})

	t.Run("suspend and resume", func(t *testing.T) {
		js := framework.OperatorJob{Namespace: ns, Name: "js-suspend", Workers: 2, Runtime: 10 * time.Minute, Suspend: true}.JobSet()
		if err := s.client.Create(ctx, js); err != nil {
			t.Fatal(err)
		}
		job := opWaitJob(ctx, t, s, ns, "js-suspend-workers-0", "JobSet", "js-suspend", time.Minute)
		opWaitObject(ctx, t, s, framework.JobSetGVK, ns, "js-suspend", "Suspended=True", time.Minute, func(u *unstructured.Unstructured) bool {
			return framework.ConditionStatus(u, "Suspended") == "True"
		})
		if !framework.Suspended(job) {
			t.Errorf("the Job of a JobSet created suspended is not suspended")
		}
		opCheckNoPods(ctx, t, s, ns, job)
		for round := 1; round <= 2; round++ {
			if err := framework.SetSuspend(ctx, s.client, js, false); err != nil {
				t.Fatal(err)
			}
			opWaitPods(ctx, t, s, ns, job, 2, corev1.PodRunning, time.Minute)
			u := opWaitObject(ctx, t, s, framework.JobSetGVK, ns, "js-suspend", "Suspended=False", time.Minute, func(u *unstructured.Unstructured) bool {
				return framework.ConditionStatus(u, "Suspended") == "False"
			})
			opCheckSameJob(ctx, t, s, job, false)
			t.Logf("resume #%d: pods running again; conditions %s", round, framework.Conditions(u))
			if err := framework.SetSuspend(ctx, s.client, js, true); err != nil {
				t.Fatal(err)
			}
			opWaitPods(ctx, t, s, ns, job, 0, "", time.Minute)
			u = opWaitObject(ctx, t, s, framework.JobSetGVK, ns, "js-suspend", "Suspended=True", time.Minute, func(u *unstructured.Unstructured) bool {
				return framework.ConditionStatus(u, "Suspended") == "True"
			})
			opCheckSameJob(ctx, t, s, job, true)
			t.Logf("suspend #%d: pods gone, the same Job suspended; conditions %s", round, framework.Conditions(u))
		}
	})
}

// checkJobSetDefaults checks that JobSet's mutating webhook filled in
// the JobSet as created.
func checkJobSetDefaults(t *testing.T, js *unstructured.Unstructured) {
	t.Helper()
	rjs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	if len(rjs) != 1 {
		t.Fatalf("replicatedJobs %v", rjs)
	}
	mode, _, _ := unstructured.NestedString(rjs[0].(map[string]any), "template", "spec", "completionMode")
	op, _, _ := unstructured.NestedString(js.Object, "spec", "successPolicy", "operator")
	if mode != "Indexed" || op != "All" {
		t.Errorf("the JobSet as created has completionMode %q and successPolicy.operator %q: want Indexed and All from JobSet's webhook", mode, op)
	}
}

// The MPI operator makes, for an MPIJob, a launcher Job
// (<mpijob>-launcher), one pod per worker (<mpijob>-worker-<i>, owned by
// the MPIJob), a headless Service, a ConfigMap (<mpijob>-config: the
// hostfile) and a Secret (<mpijob>-ssh). The launcher's pod finishes on
// the simulated nodes; the workers run until the operator deletes them:
// the MPIJob is Succeeded=True once its launcher Job completes, and with
// cleanPodPolicy Running the workers go then. Suspended, the operator
// suspends the launcher Job (the same object; the Job controller deletes
// its pod) and deletes the workers; Suspended=True, Running=False (reason
// MPIJobSuspended). Resumed, it un-suspends the launcher Job and makes the
// workers again; Suspended=False (MPIJobResumed), Running=True, and a new
// status.startTime. Created suspended, the launcher Job is created
// suspended and no worker is made.
func testMPIOperator(ctx context.Context, t *testing.T, s *suite, ns, dir string) {
	if err := s.cluster.InstallMPIJobCRD(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := framework.NewMPIOperator(ctx, s.cluster, dir)
	if err != nil {
		t.Fatal(err)
	}
	startOperator(ctx, t, o, 2*time.Minute)

	t.Run("runs to Succeeded", func(t *testing.T) {
		start := time.Now()
		mj := framework.OperatorJob{Namespace: ns, Name: "mpi", Workers: 2, Runtime: 5 * time.Second}.MPIJob()
		if err := s.client.Create(ctx, mj); err != nil {
			t.Fatal(err)
		}
		launcher := opWaitJob(ctx, t, s, ns, "mpi-launcher", "MPIJob", "mpi", time.Minute)
		opWaitPods(ctx, t, s, ns, launcher, 1, corev1.PodRunning, time.Minute)
		workers := opWaitWorkers(ctx, t, s, ns, "MPIJob", "mpi", 2, time.Minute)
		t.Logf("launcher and workers %v running %s after create", opPodNames(workers), time.Since(start).Round(time.Millisecond))
		for _, obj := range []client.Object{&corev1.Service{}, &corev1.ConfigMap{}, &corev1.Secret{}} {
			name := map[string]string{"*v1.Service": "mpi", "*v1.ConfigMap": "mpi-config", "*v1.Secret": "mpi-ssh"}[fmt.Sprintf("%T", obj)]
			if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
				t.Errorf("the MPIJob's %T %s: %v", obj, name, err)
			}
		}
		u := opWaitObject(ctx, t, s, framework.MPIJobGVK, ns, "mpi", "MPIJob Succeeded=True", time.Minute, func(u *unstructured.Unstructured) bool {
			return framework.ConditionStatus(u, "Succeeded") == "True"
		})
		t.Logf("Succeeded %s after create; conditions %s", time.Since(start).Round(time.Millisecond), framework.Conditions(u))
		opWaitWorkers(ctx, t, s, ns, "MPIJob", "mpi", 0, time.Minute)
	})

	t.Run("suspend and resume", func(t *testing.T) {
		mj := framework.OperatorJob{Namespace: ns, Name: "mpi-suspend", Workers: 2, Runtime: 10 * time.Minute, Suspend: true}.MPIJob()
		if err := s.client.Create(ctx, mj); err != nil {
			t.Fatal(err)
		}
		launcher := opWaitJob(ctx, t, s, ns, "mpi-suspend-launcher", "MPIJob", "mpi-suspend", time.Minute)
		opWaitObject(ctx, t, s, framework.MPIJobGVK, ns, "mpi-suspend", "Suspended=True", time.Minute, func(u *unstructured.Unstructured) bool {
			return framework.ConditionStatus(u, "Suspended") == "True"
		})
		if !framework.Suspended(launcher) {
			t.Errorf("the launcher Job of an MPIJob created suspended is not suspended")
		}
		opCheckNoPods(ctx, t, s, ns, launcher)
		opWaitWorkers(ctx, t, s, ns, "MPIJob", "mpi-suspend", 0, time.Second)
		for round := 1; round <= 2; round++ {
			if err := framework.SetSuspend(ctx, s.client, mj, false); err != nil {
				t.Fatal(err)
			}
			opWaitPods(ctx, t, s, ns, launcher, 1, corev1.PodRunning, time.Minute)
			opWaitWorkers(ctx, t, s, ns, "MPIJob", "mpi-suspend", 2, time.Minute)
			u := opWaitObject(ctx, t, s, framework.MPIJobGVK, ns, "mpi-suspend", "Suspended=False, Running=True", time.Minute, func(u *unstructured.Unstructured) bool {
				return framework.ConditionStatus(u, "Suspended") == "False" && framework.ConditionStatus(u, "Running") == "True"
			})
			opCheckSameJob(ctx, t, s, launcher, false)
			t.Logf("resume #%d: launcher and workers running again; conditions %s", round, framework.Conditions(u))
			if err := framework.SetSuspend(ctx, s.client, mj, true); err != nil {
				t.Fatal(err)
			}
			opWaitPods(ctx, t, s, ns, launcher, 0, "", time.Minute)
			opWaitWorkers(ctx, t, s, ns, "MPIJob", "mpi-suspend", 0, time.Minute)
			u = opWaitObject(ctx, t, s, framework.MPIJobGVK, ns, "mpi-suspend", "Suspended=True, Running=False", time.Minute, func(u *unstructured.Unstructured) bool {
				return framework.ConditionStatus(u, "Suspended") == "True" && framework.ConditionStatus(u, "Running") == "False"
			})
			opCheckSameJob(ctx, t, s, launcher, true)
			t.Logf("suspend #%d: launcher pod and workers gone, the same launcher Job suspended; conditions %s", round, framework.Conditions(u))
		}
	})
}

// KubeRay's operator makes, for a RayJob, a RayCluster (<rayjob>-<random>)
// whose head pod and worker pods it makes in turn, with the cluster's
// head Service; once the RayCluster is ready, a submitter Job named after
// the RayJob. The simulated nodes run no Ray: the RayCluster's pods run
// until it is deleted and the submitter's pod finishes, but the operator
// never reaches the cluster's dashboard (its Service's DNS name does not
// resolve on the host), so the RayJob never learns that the Ray job ran:
// once the submitter has finished, the RayJob fails 30 s later (a fixed
// timeout of KubeRay's), or later still, as each failed look-up makes the
// operator wait longer before the next (controller-runtime's exponential
// backoff): jobDeploymentStatus Failed, jobStatus FAILED, reason
// JobDeploymentStatusTransitionGracePeriodExceeded. It then deletes the
// RayCluster (shutdownAfterJobFinishes) and keeps the submitter Job.
// Suspended, the RayJob goes Suspending, then Suspended, once the
// RayCluster and the submitter Job are deleted; resumed, it starts again
// from nothing: a RayCluster of another name, a new submitter Job, a new
// jobId. Created suspended, it goes straight to Suspended and makes
// nothing.
func testRayOperator(ctx context.Context, t *testing.T, s *suite, ns, dir string) {
	if err := s.cluster.InstallRayCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := framework.NewRayOperator(ctx, s.cluster, dir)
	if err != nil {
		t.Fatal(err)
	}
	startOperator(ctx, t, o, 2*time.Minute)
	// RayJobs carry a finalizer only the running operator removes.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(framework.RayJobGVK.GroupVersion().WithKind("RayJobList"))
		one := &unstructured.Unstructured{}
		one.SetGroupVersionKind(framework.RayJobGVK)
		if err := s.client.DeleteAllOf(ctx, one, client.InNamespace(ns)); err != nil {
			t.Errorf("deleting the RayJobs: %v", err)
			return
		}
		err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
			if err := s.client.List(ctx, l, client.InNamespace(ns)); err != nil {
				return false, err.Error(), nil
			}
			return len(l.Items) == 0, fmt.Sprintf("%d RayJobs", len(l.Items)), nil
		})
		if err != nil {
			t.Errorf("the RayJobs are not gone: %v", err)
		}
	})

	// The first RayJob's end is awaited after the suspend test, which
	// runs meanwhile.
	start := time.Now()
	rj := framework.OperatorJob{Namespace: ns, Name: "ray", Workers: 1, Runtime: 2 * time.Second}.RayJob()
	if err := s.client.Create(ctx, rj); err != nil {
		t.Fatal(err)
	}
	var submitterDone time.Time
	t.Run("makes a RayCluster, its pods and a submitter Job", func(t *testing.T) {
		rc := opWaitRayCluster(ctx, t, s, ns, "ray", "", time.Minute)
		pods := opWaitWorkers(ctx, t, s, ns, "RayCluster", rc, 2, time.Minute)
		kinds := map[string]int{}
		for _, p := range pods {
			kinds[p.Labels["ray.io/node-type"]]++
		}
		if kinds["head"] != 1 || kinds["worker"] != 1 {
			t.Errorf("RayCluster %s has pods %v of node types %v, want a head and a worker", rc, opPodNames(pods), kinds)
		}
		t.Logf("RayCluster %s: head and worker running %s after create", rc, time.Since(start).Round(time.Millisecond))
		submitter := opWaitJob(ctx, t, s, ns, "ray", "RayJob", "ray", time.Minute)
		opWaitPods(ctx, t, s, ns, submitter, 1, corev1.PodSucceeded, time.Minute)
		submitterDone = time.Now()
		t.Logf("the submitter's pod succeeded %s after create", time.Since(start).Round(time.Millisecond))
		u := opGet(ctx, t, s, framework.RayJobGVK, ns, "ray")
		if st := framework.RayJobDeploymentStatus(u); st != "Running" && st != "Failed" {
			t.Errorf("jobDeploymentStatus %q after its submitter finished, want Running", st)
		}
	})

	t.Run("suspend and resume", func(t *testing.T) {
		rj := framework.OperatorJob{Namespace: ns, Name: "ray-suspend", Workers: 1, Runtime: 10 * time.Minute, Suspend: true}.RayJob()
		if err := s.client.Create(ctx, rj); err != nil {
			t.Fatal(err)
		}
		opWaitObject(ctx, t, s, framework.RayJobGVK, ns, "ray-suspend", "jobDeploymentStatus Suspended", time.Minute, func(u *unstructured.Unstructured) bool {
			return framework.RayJobDeploymentStatus(u) == "Suspended"
		})
		opCheckNoRayCluster(ctx, t, s, ns, "ray-suspend")
		var clusters []string
		for round := 1; round <= 2; round++ {
			if err := framework.SetSuspend(ctx, s.client, rj, false); err != nil {
				t.Fatal(err)
			}
			rc := opWaitRayCluster(ctx, t, s, ns, "ray-suspend", "", time.Minute)
			opWaitWorkers(ctx, t, s, ns, "RayCluster", rc, 2, time.Minute)
			submitter := opWaitJob(ctx, t, s, ns, "ray-suspend", "RayJob", "ray-suspend", time.Minute)
			opWaitPods(ctx, t, s, ns, submitter, 1, corev1.PodRunning, time.Minute)
			u := opWaitObject(ctx, t, s, framework.RayJobGVK, ns, "ray-suspend", "jobDeploymentStatus Running", time.Minute, func(u *unstructured.Unstructured) bool {
				return framework.RayJobDeploymentStatus(u) == "Running"
			})
			jobID, _, _ := unstructured.NestedString(u.Object, "status", "jobId")
			t.Logf("resume #%d: RayCluster %s, its pods and submitter Job (uid %s) running; jobId %s", round, rc, submitter.UID, jobID)
			if slices.Contains(clusters, rc) {
				t.Errorf("resumed, the RayJob took RayCluster %s again, want a new one", rc)
			}
			clusters = append(clusters, rc)
			if err := framework.SetSuspend(ctx, s.client, rj, true); err != nil {
				t.Fatal(err)
			}
			opWaitObject(ctx, t, s, framework.RayJobGVK, ns, "ray-suspend", "jobDeploymentStatus Suspended", time.Minute, func(u *unstructured.Unstructured) bool {
				return framework.RayJobDeploymentStatus(u) == "Suspended"
			})
			opCheckNoRayCluster(ctx, t, s, ns, "ray-suspend")
			opWaitWorkers(ctx, t, s, ns, "RayCluster", rc, 0, time.Minute)
			job := &batchv1.Job{}
			if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ray-suspend"}, job); !apierrors.IsNotFound(err) {
				t.Errorf("suspended, the RayJob's submitter Job: %v, want it deleted", err)
			}
			t.Logf("suspend #%d: RayCluster %s, its pods and the submitter Job deleted", round, rc)
		}
	})

	t.Run("fails, as no Ray runs", func(t *testing.T) {
		u := opWaitObject(ctx, t, s, framework.RayJobGVK, ns, "ray", "jobDeploymentStatus Failed", 4*time.Minute, func(u *unstructured.Unstructured) bool {
			st := framework.RayJobDeploymentStatus(u)
			return st == "Failed" || st == "Complete"
		})
		reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
		msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
		jobStatus, _, _ := unstructured.NestedString(u.Object, "status", "jobStatus")
		after := ""
		if !submitterDone.IsZero() {
			after = fmt.Sprintf(", %s after its submitter finished", time.Since(submitterDone).Round(time.Second))
		}
		t.Logf("jobDeploymentStatus %s %s after create%s; jobStatus %s; reason %s; message %q",
			framework.RayJobDeploymentStatus(u), time.Since(start).Round(time.Second), after, jobStatus, reason, msg)
		if framework.RayJobDeploymentStatus(u) != "Failed" || reason != "JobDeploymentStatusTransitionGracePeriodExceeded" {
			t.Errorf("jobDeploymentStatus %s, reason %s: want Failed, JobDeploymentStatusTransitionGracePeriodExceeded", framework.RayJobDeploymentStatus(u), reason)
		}
		opCheckNoRayCluster(ctx, t, s, ns, "ray")
	})
}

func opGet(ctx context.Context, t *testing.T, s *suite, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// opWaitObject waits until the object satisfies ok and returns it.
func opWaitObject(ctx context.Context, t *testing.T, s *suite, gvk schema.GroupVersionKind, ns, name, what string, timeout time.Duration, ok func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			return false, err.Error(), nil
		}
		status, _, _ := unstructured.NestedMap(u.Object, "status")
		return ok(u), fmt.Sprintf("status %v", status), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s: waiting for %s: %v", gvk.Kind, ns, name, what, err)
	}
	return u
}

// opWaitJob waits for Job name, controlled by ownerKind ownerName.
func opWaitJob(ctx context.Context, t *testing.T, s *suite, ns, name, ownerKind, ownerName string, timeout time.Duration) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("Job %s/%s: %v", ns, name, err)
	}
	if got := framework.Owner(job, ownerKind); got != ownerName {
		t.Errorf("Job %s is controlled by %s %q, want %q", name, ownerKind, got, ownerName)
	}
	return job
}

// opCheckSameJob checks that job is still the same object, with
// spec.suspend as given.
func opCheckSameJob(ctx context.Context, t *testing.T, s *suite, job *batchv1.Job, suspended bool) {
	t.Helper()
	now := &batchv1.Job{}
	if err := s.client.Get(ctx, client.ObjectKeyFromObject(job), now); err != nil {
		t.Errorf("Job %s: %v", job.Name, err)
		return
	}
	if now.UID != job.UID {
		t.Errorf("Job %s is a new object (uid %s, was %s)", job.Name, now.UID, job.UID)
	}
	if framework.Suspended(now) != suspended {
		t.Errorf("Job %s: suspend %v, want %v", job.Name, framework.Suspended(now), suspended)
	}
}

// opPods lists the pods of ns controlled by ownerKind ownerName (with a
// controller owner reference of that uid when uid is set), but those
// being deleted.
func opPods(ctx context.Context, s *suite, ns, ownerKind, ownerName string, uid types.UID) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := s.client.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil || framework.Owner(&p, ownerKind) != ownerName {
			continue
		}
		if uid != "" && !slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == uid }) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// opWaitPods waits until job has exactly n pods, all in phase (any
// phase when it is empty).
func opWaitPods(ctx context.Context, t *testing.T, s *suite, ns string, job *batchv1.Job, n int, phase corev1.PodPhase, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = opPods(ctx, s, ns, "Job", job.Name, job.UID); err != nil {
			return false, err.Error(), nil
		}
		return len(pods) == n && opAllIn(pods, phase), opPhases(pods), nil
	})
	if err != nil {
		t.Fatalf("Job %s: waiting for %d pods %s: %v", job.Name, n, phase, err)
	}
	return pods
}

// opWaitWorkers waits until ownerKind ownerName controls exactly n
// running pods.
func opWaitWorkers(ctx context.Context, t *testing.T, s *suite, ns, ownerKind, ownerName string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = opPods(ctx, s, ns, ownerKind, ownerName, ""); err != nil {
			return false, err.Error(), nil
		}
		return len(pods) == n && opAllIn(pods, corev1.PodRunning), opPhases(pods), nil
	})
	if err != nil {
		t.Fatalf("%s %s: waiting for %d running pods: %v", ownerKind, ownerName, n, err)
	}
	return pods
}

// opCheckNoPods checks, a few seconds long, that job has no pod.
func opCheckNoPods(ctx context.Context, t *testing.T, s *suite, ns string, job *batchv1.Job) {
	t.Helper()
	for range 20 {
		pods, err := opPods(ctx, s, ns, "Job", job.Name, job.UID)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) > 0 {
			t.Fatalf("suspended Job %s has pods %s", job.Name, opPhases(pods))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// opWaitRayCluster waits for a RayCluster controlled by RayJob rayJob
// whose name is not skip, and returns its name.
func opWaitRayCluster(ctx context.Context, t *testing.T, s *suite, ns, rayJob, skip string, timeout time.Duration) string {
	t.Helper()
	var name string
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		names, err := opRayClusters(ctx, s, ns, rayJob)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, n := range names {
			if n != skip {
				name = n
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("RayClusters %v", names), nil
	})
	if err != nil {
		t.Fatalf("RayJob %s: waiting for its RayCluster: %v", rayJob, err)
	}
	return name
}

func opCheckNoRayCluster(ctx context.Context, t *testing.T, s *suite, ns, rayJob string) {
	t.Helper()
	err := framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		names, err := opRayClusters(ctx, s, ns, rayJob)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(names) == 0, fmt.Sprintf("RayClusters %v", names), nil
	})
	if err != nil {
		t.Errorf("RayJob %s: waiting until it has no RayCluster: %v", rayJob, err)
	}
}

// opRayClusters names the RayClusters of ns controlled by RayJob rayJob,
// but those being deleted.
func opRayClusters(ctx context.Context, s *suite, ns, rayJob string) ([]string, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(framework.RayClusterGVK.GroupVersion().WithKind("RayClusterList"))
	if err := s.client.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var names []string
	for i := range l.Items {
		rc := &l.Items[i]
		if rc.GetDeletionTimestamp() == nil && framework.Owner(rc, "RayJob") == rayJob {
			names = append(names, rc.GetName())
		}
	}
	return names, nil
}

func opAllIn(pods []corev1.Pod, phase corev1.PodPhase) bool {
	for _, p := range pods {
		if phase != "" && p.Status.Phase != phase {
			return false
		}
	}
	return true
}

func opPhases(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"="+string(p.Status.Phase))
	}
	return "pods [" + strings.Join(out, " ") + "]"
}

func opPodNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
