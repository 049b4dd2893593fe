// Package kindstest builds workload objects for tests: Jobs (Job) and
// PyTorchJobs (PyTorchJob), as users write them or as tally leaves them,
// with small fluent builders:
//
//	kindstest.Job("team", "train").Label(queues.LabelQueue, "q").Suspend(true).Request(corev1.ResourceCPU, "1").Obj()
//
// A builder sets only what it is told: Job(ns, name) alone is a Job with
// a namespace and a name and nothing else.
//
// It imports neither kinds nor queues, so that their own tests can use it,
// and so it names no label of tally's: tests pass queues' label names to
// Label and Annotation. It may import the standard library and the
// Kubernetes API types; the tests of any tally package may import it, and
// no package that is not a test.
package kindstest
