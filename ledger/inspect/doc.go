// Package inspect is tally's read side for status, explain and the
// dashboard: it reads from the API server (or from a copy of the ledger's
// books) what they show, and never imports the ledger's runtime.
//
// Status rebuilds every ClusterQueue's books from a list of workloads,
// folding each with the state machine as the ledger does
// (machine.Observe, on the fields StatusOf copies, for the ledger too), and
// WriteStatus prints them; Explain says where one workload stands,
// replaying admission passes (queues.Decide) to estimate its start, and
// WriteExplanation prints it. Dashboard builds the dashboard's view from
// Books, a copy of the ledger's books taken under its lock, running its
// admission pass on the copy; DashboardHandler serves it.
//
// LoadConfig reads the config in force, through kinds.Accept as tally
// itself does, and ListWorkloads lists the managed workloads as the
// ledger counts them, and ListClaimTemplates the ResourceClaimTemplates
// their claims are charged from; ShowStatus and ExplainWorkload build
// `tally status` and `tally explain` on them.
//
// It may import tally's kinds, queues, queues/deviceclass and flavors
// packages, the state
// machine (ledger/machine), the Kubernetes API machinery and
// controller-runtime's client; never the ledger itself (imports_test.go
// checks), webhook or main. The ledger and main import it.
package inspect
