#!/usr/bin/env bash
# Usage: build.sh [DIR [NAME...]]
#
# Builds the pinned control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd), kwok/kwokctl and the training operator
# from the Go module proxy into DIR (default:
# $HOME/.cache/tally/tools-$KUBE_VERSION). Given NAMEs, it builds only those
# binaries; besides the default set, the names may be the operators the
# tests build when they first need them: jobset-controller, mpi-operator,
# ray-operator, trainer-controller (Kubeflow Trainer v2), karpenter (its KWOK cloud provider) and cert-manager, helm (make helm-check, e2e/helminstall),
# and kueue-perf: Kueue's scheduler-performance runner and minimalkueue
# (make bench-kueue). Each binary is built only when it is missing, so a
# second run is a no-op. Two runs never build the same binary into one
# DIR at once (a lock per binary, DIR/.build-NAME.lock), but may build two
# different ones side by side. The wrapper modules it needs live in
# DIR/.src.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.0}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
TRAINING_OPERATOR_VERSION=${TRAINING_OPERATOR_VERSION:-v1.9.4}
JOBSET_VERSION=${JOBSET_VERSION:-v0.12.0}
MPI_OPERATOR_VERSION=${MPI_OPERATOR_VERSION:-v0.8.2}
KUBERAY_VERSION=${KUBERAY_VERSION:-v1.6.1}
TRAINER_VERSION=${TRAINER_VERSION:-v2.3.0}
HELM_VERSION=${HELM_VERSION:-v3.17.3}
KUEUE_VERSION=${KUEUE_VERSION:-v0.19.2}
KARPENTER_VERSION=${KARPENTER_VERSION:-v1.15.0}
# Karpenter's module asks for a newer Go than the project's; the go command
# fetches this toolchain from the proxy for that one build.
KARPENTER_GOTOOLCHAIN=${KARPENTER_GOTOOLCHAIN:-go1.27.3}
out=${1:-$HOME/.cache/tally/tools-$KUBE_VERSION}
[ $# -gt 0 ] && shift
# What a run without names builds (make toolchain).
defaults=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl training-operator)
operators=(jobset-controller mpi-operator ray-operator trainer-controller karpenter cert-manager helm kueue-perf)
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${defaults[@]}")
for b in "${wanted[@]}"; do
  case " ${defaults[*]} ${operators[*]} " in
  *" $b "*) ;;
  *) echo "build.sh: unknown binary $b (known: ${defaults[*]} ${operators[*]})" >&2; exit 2 ;;
  esac
done
# The wrapper modules are built on their own, whatever the caller's module
# settings.
export GOWORK=off GOFLAGS=
mkdir -p "$out"
out=$(cd "$out" && pwd)
work="$out/.src"
mkdir -p "$work"

# need NAME...: some NAME is wanted and missing.
need() {
  local b
  for b in "$@"; do
    case " ${wanted[*]} " in *" $b "*) [ -x "$out/$b" ] || return 0 ;; esac
  done
  return 1
}
# claim NAME...: like need, but first waits for the lock of the first NAME
# (the group's build), releasing the lock of the group before: two test
# processes may each find an operator missing, and the second then finds it
# built.
claim() {
  need "$@" || return 1
  exec 9>"$out/.build-$1.lock"
  flock 9
  need "$@"
}
log() { printf 'toolchain: %s\n' "$*" >&2; }
started=$SECONDS

if claim kube-apiserver kube-controller-manager kube-scheduler kubectl; then
  log "building Kubernetes $KUBE_VERSION (several minutes on a cold cache)"
  mod="$work/kube"
  mkdir -p "$mod"
  go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" >/dev/null
  kgomod="$(go env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION/go.mod"
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  stag="v0.$minor.$(echo "$KUBE_VERSION" | cut -d. -f3)"
  {
    echo "module tally.dev/toolchain/kube"
    echo
    echo "go 1.25"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    grep -E '=> \./staging' "$kgomod" | awk -v v="$stag" '{print "replace " $1 " => " $1 " " v}'
  } >"$mod/go.mod"
  cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy)
  ld=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    need "$c" || continue
    log "go build $c"
    (cd "$mod" && go build -ldflags "-s -w $ld" -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c" && mv "$out/$c.tmp" "$out/$c")
  done
fi

if claim etcd; then
  log "building etcd $ETCD_VERSION"
  mod="$work/etcd"
  mkdir -p "$mod"
  cat >"$mod/go.mod" <<GOMOD
module tally.dev/toolchain/etcd

go 1.25

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)
GOMOD
  cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy && go build -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3 && mv "$out/etcd.tmp" "$out/etcd")
fi

for c in kwok kwokctl; do
  claim "$c" || continue
  log "go install $c $KWOK_VERSION"
  GOBIN="$out" go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/$c@$KWOK_VERSION"
done
# build_module BIN MODULE VERSION PACKAGE [LDFLAGS]: builds PACKAGE of MODULE@VERSION
# into $out/BIN.tmp, from a writable copy of the module in $mod with
# -mod=mod, so go may update the copy's go.mod and go.sum as the build needs
# (the training operator's module pins versions older than its go.mod asks
# for). The copy stays in $mod for the caller to take CRDs from;
# finish_module then puts the binary in place, after its CRDs.
build_module() {
  local bin=$1 module=$2 version=$3 pkg=$4 ld=${5:-} src
  src=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || { log "go mod download $module@$version gave no directory"; exit 1; }
  mod="$work/$bin"
  rm -rf "$mod" && mkdir -p "$mod" && cp -r "$src/." "$mod" && chmod -R u+w "$mod"
  (cd "$mod" && GOFLAGS=-mod=mod go build -ldflags "-s -w $ld" -o "$out/$bin.tmp" "$pkg")
}
# finish_module BIN: removes the copy and puts the binary in place.
finish_module() {
  rm -rf "$mod"
  mv "$out/$1.tmp" "$out/$1"
}

# The Kubeflow training operator (v1), for the PyTorchJob tests and the demo.
# Its CRDs are copied beside it.
if claim training-operator; then
  log "building the training operator $TRAINING_OPERATOR_VERSION (several minutes on a cold cache)"
  build_module training-operator github.com/kubeflow/training-operator "$TRAINING_OPERATOR_VERSION" ./cmd/training-operator.v1
  mkdir -p "$out/crds/training-operator"
  cp "$mod"/manifests/base/crds/kubeflow.org_*.yaml "$out/crds/training-operator/"
  finish_module training-operator
fi

# The operators below are not in the default set: the e2e framework builds
# each the first time a test needs it (e2e/framework/operators.go).

# JobSet's controller (sigs.k8s.io/jobset), for JobSets; its CRD beside it.
if claim jobset-controller; then
  log "building the JobSet controller $JOBSET_VERSION (a few minutes on a cold cache)"
  build_module jobset-controller sigs.k8s.io/jobset "$JOBSET_VERSION" .
  mkdir -p "$out/crds/jobset"
  cp "$mod"/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml "$out/crds/jobset/"
  finish_module jobset-controller
fi

# The Kubeflow MPI operator (v2), for MPIJobs of kubeflow.org/v2beta1; its
# CRD beside it.
if claim mpi-operator; then
  log "building the MPI operator $MPI_OPERATOR_VERSION (a few minutes on a cold cache)"
  build_module mpi-operator github.com/kubeflow/mpi-operator "$MPI_OPERATOR_VERSION" ./cmd/mpi-operator
  mkdir -p "$out/crds/mpi-operator"
  cp "$mod"/manifests/base/kubeflow.org_mpijobs.yaml "$out/crds/mpi-operator/"
  finish_module mpi-operator
fi

# KubeRay's operator, for RayJobs, RayClusters and RayServices; their CRDs
# (and RayCronJob's) beside it.
if claim ray-operator; then
  log "building the KubeRay operator $KUBERAY_VERSION (a few minutes on a cold cache)"
  build_module ray-operator github.com/ray-project/kuberay/ray-operator "$KUBERAY_VERSION" .
  mkdir -p "$out/crds/ray-operator"
  cp "$mod"/config/crd/bases/ray.io_*.yaml "$out/crds/ray-operator/"
  finish_module ray-operator
fi
# Kubeflow Trainer v2's controller manager, for TrainJobs (it runs them as
# JobSets, so JobSet's controller runs beside it); the TrainJob,
# TrainingRuntime and ClusterTrainingRuntime CRDs and its runtimes beside it.
if claim trainer-controller; then
  log "building the Kubeflow Trainer controller $TRAINER_VERSION (a few minutes on a cold cache)"
  build_module trainer-controller github.com/kubeflow/trainer/v2 "$TRAINER_VERSION" ./cmd/trainer-controller-manager
  mkdir -p "$out/crds/trainer"
  cp "$mod"/manifests/base/crds/trainer.kubeflow.org_*.yaml "$out/crds/trainer/"
  finish_module trainer-controller
fi
# Karpenter with its KWOK cloud provider (sigs.k8s.io/karpenter/kwok),
# which makes Node objects for kwok to run; the NodePool, NodeClaim and
# KWOKNodeClass CRDs beside it. Its module needs a newer Go than the
# machine's, so the go command runs $KARPENTER_GOTOOLCHAIN for this build
# only.
if claim karpenter; then
  log "building Karpenter $KARPENTER_VERSION (KWOK provider, $KARPENTER_GOTOOLCHAIN; a few minutes on a cold cache)"
  GOTOOLCHAIN=$KARPENTER_GOTOOLCHAIN build_module karpenter sigs.k8s.io/karpenter "$KARPENTER_VERSION" ./kwok
  mkdir -p "$out/crds/karpenter"
  cp "$mod"/pkg/apis/crds/karpenter.sh_nodepools.yaml "$mod"/pkg/apis/crds/karpenter.sh_nodeclaims.yaml \
    "$mod"/kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml "$out/crds/karpenter/"
  finish_module karpenter
fi
# cert-manager's controllers and cainjector, for the cert-manager overlay's
# test: its cmd/ modules are not served by the proxy, so a main of tally's
# own (e2e/toolchain/cert-manager, a module apart, pinned by its go.sum)
# runs them from the main module. Its CRDs beside it.
if claim cert-manager; then
  log "building cert-manager's controllers (a few minutes on a cold cache)"
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cert-manager"
  (cd "$src" && go build -ldflags "-s -w" -o "$out/cert-manager.tmp" .)
  crds="$(cd "$src" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds"
  mkdir -p "$out/crds/cert-manager"
  cp "$crds"/*.yaml "$out/crds/cert-manager/"
  chmod u+w "$out"/crds/cert-manager/*.yaml
  mv "$out/cert-manager.tmp" "$out/cert-manager"
fi
# Helm, for make helm-check and e2e/helminstall (the chart
# deploy/helm/tally): not in the default set either.
if claim helm; then
  log "building helm $HELM_VERSION (a few minutes on a cold cache)"
  build_module helm helm.sh/helm/v3 "$HELM_VERSION" ./cmd/helm "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  finish_module helm
fi
# Kueue's scheduler performance test (test/performance/scheduler of
# sigs.k8s.io/kueue), for make bench-kueue: kueue-perf-$KUEUE_VERSION/
# holds its runner, minimalkueue (Kueue's core controllers and scheduler),
# Kueue's CRDs and its scenarios' generator and range configs, one folder
# per version. Not in the default set either.
kpout="$out/kueue-perf-$KUEUE_VERSION"
if [[ " ${wanted[*]} " == *" kueue-perf "* ]] && [ ! -x "$kpout/minimalkueue-qps500" ] &&
  exec 9>"$out/.build-kueue-perf.lock" && flock 9 && [ ! -x "$kpout/minimalkueue-qps500" ]; then
  log "building Kueue's scheduler-performance runner and minimalkueue $KUEUE_VERSION (several minutes on a cold cache)"
  build_module kueue-perf-runner sigs.k8s.io/kueue "$KUEUE_VERSION" ./test/performance/scheduler/runner
  kp="$kpout.tmp"
  rm -rf "$kp" && mkdir -p "$kp/crds"
  mv "$out/kueue-perf-runner.tmp" "$kp/runner"
  (cd "$mod" && GOFLAGS=-mod=mod go build -ldflags "-s -w" -o "$kp/minimalkueue" ./test/performance/scheduler/minimalkueue)
  # minimalkueue-qps500: the same, with only its client budget raised to
  # tally's default (--kube-api-qps=500 --kube-api-burst=1000), one line
  # per value: `kubeConfig.QPS = 50` becomes 500 and `kubeConfig.Burst =
  # 100` becomes 1000. The build fails if either line is not found.
  mk="$mod/test/performance/scheduler/minimalkueue/main.go"
  grep -q '^\s*kubeConfig.QPS = 50$' "$mk" && grep -q '^\s*kubeConfig.Burst = 100$' "$mk" ||
    { log "minimalkueue's client budget lines (kubeConfig.QPS = 50, kubeConfig.Burst = 100) not found in $mk"; exit 1; }
  sed -i -e 's/^\(\s*kubeConfig.QPS = \)50$/\1500/' -e 's/^\(\s*kubeConfig.Burst = \)100$/\11000/' "$mk"
  (cd "$mod" && GOFLAGS=-mod=mod go build -ldflags "-s -w" -o "$kp/minimalkueue-qps500" ./test/performance/scheduler/minimalkueue)
  grep -n 'kubeConfig\.\(QPS\|Burst\) = ' "$mk" | sed 's|^|minimalkueue/main.go:|' >"$kp/minimalkueue-qps500.edit"
  cp "$mod"/config/components/crd/bases/*.yaml "$kp/crds/"
  cp -r "$mod"/test/performance/scheduler/configs "$kp/configs"
  echo "$KUEUE_VERSION" >"$kp/VERSION"
  rm -rf "$mod" "$kpout"
  mv "$kp" "$kpout"
fi
log "ready in $out ($((SECONDS - started))s)"
