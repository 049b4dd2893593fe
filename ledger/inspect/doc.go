// Package inspect is tally's read side for status, explain and the
// dashboard: it reads from the API server (or from a copy of the ledger's
// books) what they show, and never imports the ledger's runtime.
//
// LoadConfig reads the config in force, through kinds.Accept as tally
// itself does, and ListWorkloads lists the managed workloads as the
// ledger counts them; ShowStatus and ExplainWorkload build `tally status`
// and `tally explain` on them.
//
// It may import tally's kinds and queues packages, the Kubernetes API
// machinery and controller-runtime's client, and of the ledger only its
// pure read side and names: Explain (ExplainInput, Explanation), Status
// and WriteStatus, StripJob and ConfigName. Only main imports it.
package inspect
