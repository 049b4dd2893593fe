// Package framework runs tally's end-to-end tests: a local kwok cluster made
// by e2e/cluster/up.sh, tally as a real process against it, and helpers that
// build Jobs, wait for conditions and watch what tally does to them.
//
// The tests speak only the user-facing contract (labels, annotations,
// Events, the ConfigMap), so the names it uses are spelled out here rather
// than imported from tally's packages.
package framework

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
)

// Names from tally's contract.
const (
	LabelState           = "tally.dev/state"
	LabelQueue           = "tally.dev/cluster-queue"
	LabelManaged         = "tally.dev/managed"
	LabelPriorityClass   = "tally.dev/priority-class"
	LabelKueueQueueName  = "kueue.x-k8s.io/queue-name"
	LabelKueuePriority   = "kueue.x-k8s.io/priority-class"
	AnnotationQueue      = "tally.dev/cluster-queue"
	AnnotationFlavors    = "tally.dev/flavors"
	AnnotationAdmittedAt = "tally.dev/admitted-at"

	StatePending      = "pending"
	StateAdmitted     = "admitted"
	StateInadmissible = "inadmissible"
	StateFinished     = "finished"

	ConfigMapName = "tally-config"
	ConfigKey     = "queues.yaml"

	ReasonAdmitted = "Admitted"

	// AnnotationRuntime on a pod template sets how long the simulated pod
	// runs before it succeeds (see e2e/cluster/stages.yaml).
	AnnotationRuntime = "tally.dev/e2e-runtime"
	// ResourceGPU is the extended resource of the GPU nodes.
	ResourceGPU = "nvidia.com/gpu"
)

// Env says where the tools, the tally binary and the repository are.
type Env struct {
	// Tools holds etcd, kube-apiserver, ..., kwokctl (TALLY_TOOLS).
	Tools string
	// Bin is the tally binary under test (TALLY_BIN).
	Bin string
	// Root is the repository root.
	Root string
}

// FromEnv reads TALLY_TOOLS and TALLY_BIN. The error says what is missing,
// for a skip message.
func FromEnv() (Env, error) {
	e := Env{Tools: os.Getenv("TALLY_TOOLS"), Bin: os.Getenv("TALLY_BIN"), Root: repoRoot()}
	switch {
	case e.Tools == "" || e.Bin == "":
		return e, errors.New("TALLY_TOOLS and TALLY_BIN must be set to run the e2e tests (make test-e2e sets them)")
	case !executable(filepath.Join(e.Tools, "kwokctl")):
		return e, errors.New("TALLY_TOOLS=" + e.Tools + " has no kwokctl (run make toolchain)")
	case !executable(e.Bin):
		return e, errors.New("TALLY_BIN=" + e.Bin + " is not an executable (run make build)")
	}
	return e, nil
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// repoRoot is the repository's root: the nearest directory, from the
// working directory up, that holds tally's go.mod (a test runs in its
// package's directory, make bench at the root). Not the source file's
// path, which the tests' -trimpath build leaves out.
func repoRoot() string {
	wd, _ := os.Getwd()
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module tally.dev/tally\n")) {
			return dir
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}
