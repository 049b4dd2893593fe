package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// TestWriteModes runs the suite's tally with the non-default values of
// its write switches (--admission-patch, --events, --finished-label,
// --api-content-type) and checks that Jobs are admitted, run and release
// their quota as with the defaults: three Jobs of 1 CPU in a queue of 2,
// two admitted at once, the third when one finishes. With
// --events=minimal, only the Job that waited has Queued and Pending
// Events; with --finished-label=off, a finished Job keeps its admitted
// label (its own status says it finished).
func TestWriteModes(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const queue = "e2e-modes"
	useQueues(ctx, t, s, []string{queue}, cpuQueue(queue, 2, ""))
	for i, tc := range []struct {
		name    string
		args    []string
		label   string // the state label of a finished Job
		minimal bool
	}{
		{"json patch, minimal events, lazy finished label",
			[]string{"--admission-patch=json", "--events=minimal", "--finished-label=lazy", "--finished-label-rate=5"}, framework.StateFinished, true},
		{"server-side apply, JSON encoding, no finished label",
			[]string{"--admission-patch=apply", "--api-content-type=json", "--finished-label=off"}, framework.StateAdmitted, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restartTallyWith(ctx, t, s, tc.args...)
			ns := fmt.Sprintf("e2e-modes-%d", i)
			if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
				t.Fatal(err)
			}
			names := []string{"a", "b", "c"}
			for _, n := range names {
				if err := framework.CreateJobs(ctx, s.client, framework.NewJob(ns, n).Request("cpu", "1").Runtime(3*time.Second).Obj()); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range names {
				waitJobFinished(ctx, t, s, ns, n)
			}
			// Every Job has released its quota, whatever its label.
			err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
				released, err := framework.JobEvents(ctx, s.client, ns, "QuotaReleased")
				if err != nil {
					return false, "", err
				}
				labels := map[string]string{}
				for _, n := range names {
					j := &batchv1.Job{}
					if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, j); err != nil {
						return false, "", err
					}
					if j.Labels[framework.LabelState] != tc.label || len(released[n]) == 0 {
						labels[n] = j.Labels[framework.LabelState]
					}
				}
				return len(labels) == 0, fmt.Sprintf("not yet labelled %s with QuotaReleased: %v", tc.label, labels), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			events := map[string]map[string][]string{}
			for _, reason := range []string{"Queued", "Pending", "Admitted"} {
				es, err := framework.JobEvents(ctx, s.client, ns, reason)
				if err != nil {
					t.Fatal(err)
				}
				events[reason] = map[string][]string{}
				for n, e := range es {
					for _, x := range e {
						events[reason][n] = append(events[reason][n], x.Message)
					}
				}
			}
			waited := 0
			for _, n := range names {
				if len(events["Admitted"][n]) != 1 {
					t.Errorf("Job %s: Admitted Events %q, want one", n, events["Admitted"][n])
				}
				pending := len(events["Pending"][n]) > 0
				if pending {
					waited++
				}
				queued := len(events["Queued"][n]) > 0
				if want := pending || !tc.minimal; queued != want {
					t.Errorf("Job %s: Queued Event %v, want %v (it waited: %v; minimal Events: %v)", n, queued, want, pending, tc.minimal)
				}
			}
			if waited != 1 {
				t.Errorf("%d Jobs have a Pending Event, want the one that waited: %v", waited, events["Pending"])
			}
		})
	}
}

// restartTallyWith restarts the suite's tally with extra arguments, and
// again without them when the test ends.
func restartTallyWith(ctx context.Context, t *testing.T, s *suite, args ...string) {
	t.Helper()
	restart := func(ctx context.Context, args []string) error {
		if err := s.tally.Stop(10 * time.Second); err != nil {
			return err
		}
		s.tally.ExtraArgs = args
		if err := s.tally.Start(); err != nil {
			return err
		}
		return s.tally.WaitReady(ctx, time.Minute)
	}
	if err := restart(ctx, args); err != nil {
		t.Fatalf("restarting tally with %v: %v", args, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			printTail(s.tally.LogPath(), 40)
		}
		if err := restart(context.Background(), nil); err != nil {
			t.Errorf("restarting the suite's tally: %v", err)
		}
	})
}
