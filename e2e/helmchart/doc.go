// Package helmchart tests the Helm chart of deploy/helm/tally: rendered
// with the toolchain's helm, it must hold the same objects as deploy/
// (built with the toolchain's kubectl kustomize), in each cert mode, and
// its values must do what the README says. It skips without TALLY_TOOLS;
// make helm-check runs it.
//
// It imports only the Kubernetes API machinery and the test libraries.
package helmchart
