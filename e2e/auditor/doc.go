// Command auditor watches a cluster's Jobs (and PyTorchJobs) and pods and checks, at every
// change, that the quota of a Kueue-style config is never exceeded. It
// knows nothing of how tally decides: it reads the config documents
// (ClusterQueues with their cohorts, nominal quotas and borrowing limits)
// from a file, and the API objects through plain informers. It counts
//   - admitted usage: every Job that is not suspended and not finished,
//     at parallelism × its pod's requests, and with --pytorchjobs every
//     such PyTorchJob (runPolicy.suspend; a Succeeded or Failed
//     condition), at the sum over its replica specs of replicas × the
//     pod's requests, charged to the ClusterQueue of its
//     tally.dev/cluster-queue label;
//   - running usage: every pod of such a workload that has not succeeded
//     or failed, terminating ones included, at its requests;
//
// against each ClusterQueue's nominal quota plus its borrowing limit, and
// each cohort's nominal quotas summed. It records every moment where a
// limit is exceeded, and per Job when it was created, admitted (spec.suspend
// true → false), preempted (false → true before it finished), finished
// and deleted. On SIGTERM or SIGINT it writes its report as JSON to --out
// and exits.
//
// It imports nothing of tally: only the Kubernetes client libraries.
package main
