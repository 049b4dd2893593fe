// Command manifests writes the install manifests that follow from tally's
// code: the webhook configurations (webhook.Configurations, which tally
// also registers at run time) and the RBAC objects (kinds.Rules for the
// workload kinds, and what tally itself reads and writes), into
// deploy/base and the Helm chart deploy/helm/tally. `make manifests` runs
// it; its test fails when a committed file differs from what it writes.
//
// It may import tally's webhook and kinds packages and the Kubernetes API
// types; nothing imports it.
package main
