// Package deviceclass evaluates a DeviceClass's selectors on the devices
// that drivers publish in ResourceSlices, as kube-scheduler does: each
// selector is a CEL expression, compiled and evaluated by
// k8s.io/dynamic-resource-allocation/cel, the scheduler's own evaluator,
// so a class selects here exactly the devices it selects there. The
// ledger compiles each DeviceClass it watches (Compile) and hands the
// result to the topologies' domains (queues.FlavorDomains), which count
// a node's devices of mapped classes.
//
// It imports only the Kubernetes API types and the evaluator, never
// another tally package: the evaluator brings the API server's CEL
// libraries and their metrics, which the pure admission core (queues,
// and the state machine above it) keeps out of its imports.
package deviceclass
