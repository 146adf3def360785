#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from the Go wrapper modules in tests/control-plane into a
# versioned cache outside the clone:
#   ${EGRESS_CONTROL_PLANE_DIR:-$HOME/.cache/egress-proxies/control-plane/<kubernetes version>}
# Does nothing when all three binaries are there and report the pinned versions. A cold build (empty Go
# caches) takes about 4 minutes on 2 cores (docs/testing.md); later builds reuse the Go caches under
# ~/.cache/egress-proxies/go.
set -euo pipefail
. "$(dirname "$0")/control-plane-env.sh"

etcd_release="${ETCD_VERSION#v}"
bin="$control_plane_dir"

versions_ok() {
  [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kubectl" ] && [ -x "$bin/etcd" ] || return 1
  "$bin/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $KUBERNETES_VERSION" || return 1
  "$bin/kubectl" version --client 2>/dev/null | grep -qx "Client Version: $KUBERNETES_VERSION" || return 1
  "$bin/etcd" --version 2>/dev/null | grep -qx "etcd Version: $etcd_release" || return 1
}

report() {
  echo "   $("$bin/kube-apiserver" --version)  (kube-apiserver)"
  echo "   $("$bin/kubectl" version --client | head -1)  (kubectl)"
  echo "   $("$bin/etcd" --version | head -1)"
}

if versions_ok; then
  echo "== control plane already built in $bin"
  report
  exit 0
fi

started=$SECONDS
step() { echo "== [$(date +%H:%M:%S) +$((SECONDS - started))s] $*"; }

mkdir -p "$bin"
# Build next to the destination and rename into place, so an interrupted build never leaves a binary
# that looks complete, and two concurrent builds cannot hand out a half-written file.
work="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The values hack/lib/version.sh stamps into a release build, so --version reports the real release.
minor="${KUBERNETES_VERSION#v1.}"
minor="${minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
k8s_ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

step "downloading Go modules for kubernetes $KUBERNETES_VERSION and etcd $ETCD_VERSION (GOMODCACHE=$GOMODCACHE)"
(cd "$cp_modules/kubernetes" && go mod download)
(cd "$cp_modules/etcd" && go mod download)

# Runs a `go build -v` in the background and prints, every 15 s, how many packages it has compiled so
# far, so a first build (minutes of silence otherwise) shows it is moving. The package list goes to a log
# under the work directory; go's own errors still reach the terminal.
go_build_with_progress() {
  local what="$1" dir="$2" log="$work/$1.packages"
  shift 2
  (cd "$dir" && go build -v "$@" 2>"$log") &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
      sleep 1
      kill -0 "$pid" 2>/dev/null || break
    done
    kill -0 "$pid" 2>/dev/null && echo "   ... $what: $(grep -cv '^#\|: ' "$log") packages compiled, $((SECONDS - started))s"
  done
  if ! wait "$pid"; then
    grep -v '^[a-z0-9._/-]*$' "$log" >&2 || true
    echo "error: building $what failed" >&2
    return 1
  fi
}

step "building etcd $ETCD_VERSION"
go_build_with_progress etcd "$cp_modules/etcd" -trimpath -ldflags "-s -w" -o "$work/etcd" go.etcd.io/etcd/server/v3

step "building kube-apiserver and kubectl $KUBERNETES_VERSION (the long step, about 3 minutes cold; GOCACHE=$GOCACHE)"
go_build_with_progress kube-apiserver+kubectl "$cp_modules/kubernetes" -trimpath -ldflags "$k8s_ldflags" -o "$work/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl

for b in etcd kube-apiserver kubectl; do mv -f "$work/$b" "$bin/$b"; done
if ! versions_ok; then
  echo "error: the built binaries do not report $KUBERNETES_VERSION / etcd $etcd_release:" >&2
  report >&2
  exit 1
fi
step "control plane ready in $bin"
report
