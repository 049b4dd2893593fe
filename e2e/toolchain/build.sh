#!/usr/bin/env bash
# Builds the pinned control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd) and kwok/kwokctl from the Go module proxy into
# $1 (default: $HOME/.cache/tally/tools-$KUBE_VERSION). Each binary is built
# only when it is missing, so a second run is a no-op. The wrapper modules it
# needs live in $1/.src.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.0}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
TRAINING_OPERATOR_VERSION=${TRAINING_OPERATOR_VERSION:-v1.9.4}
out=${1:-$HOME/.cache/tally/tools-$KUBE_VERSION}
# The wrapper modules are built on their own, whatever the caller's module
# settings.
export GOWORK=off GOFLAGS=
mkdir -p "$out"
out=$(cd "$out" && pwd)
work="$out/.src"
mkdir -p "$work"

need() { for b in "$@"; do [ -x "$out/$b" ] || return 0; done; return 1; }
log() { printf 'toolchain: %s\n' "$*" >&2; }
started=$SECONDS

if need kube-apiserver kube-controller-manager kube-scheduler kubectl; then
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
    [ -x "$out/$c" ] && continue
    log "go build $c"
    (cd "$mod" && go build -ldflags "-s -w $ld" -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c" && mv "$out/$c.tmp" "$out/$c")
  done
fi

if need etcd; then
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
  [ -x "$out/$c" ] && continue
  log "go install $c $KWOK_VERSION"
  GOBIN="$out" go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/$c@$KWOK_VERSION"
done
# The Kubeflow training operator (v1), for the PyTorchJob tests and the demo.
# Its module pins versions older than its own go.mod asks for, so it builds
# from a writable copy with -mod=mod. Its CRDs are copied beside it.
if need training-operator; then
  log "building the training operator $TRAINING_OPERATOR_VERSION (several minutes on a cold cache)"
  go mod download -json "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION" >/dev/null
  src="$(go env GOMODCACHE)/github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION"
  mod="$work/training-operator"
  rm -rf "$mod" && mkdir -p "$mod" && cp -r "$src/." "$mod" && chmod -R u+w "$mod"
  (cd "$mod" && GOFLAGS=-mod=mod go build -ldflags "-s -w" -o "$out/training-operator.tmp" ./cmd/training-operator.v1)
  mkdir -p "$out/crds/training-operator"
  cp "$mod"/manifests/base/crds/kubeflow.org_*.yaml "$out/crds/training-operator/"
  rm -rf "$mod"
  mv "$out/training-operator.tmp" "$out/training-operator"
fi
log "ready in $out ($((SECONDS - started))s)"
