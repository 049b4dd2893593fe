// Package helminstall installs the Helm chart deploy/helm/tally with
// `helm install` on a kwok cluster of its own (the Deployment at 0
// replicas), runs tally on the host as the chart's service account against
// the chart's RBAC and webhook configurations, and checks that Jobs are
// queued, admitted within quota and finished, then uninstalls the release.
// It skips without TALLY_TOOLS and TALLY_BIN (make test sets them) and
// builds helm into the toolchain when it is missing.
//
// It imports e2e/framework and the Kubernetes API machinery only.
package helminstall
