# Sourced by the control-plane scripts: the versions and a Go environment whose caches live outside the
# clone, so fresh clones (and CI) reuse downloaded modules and compiled packages.
# shellcheck shell=bash
cp_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cp_modules="$cp_root/tests/control-plane"
# shellcheck source=../tests/control-plane/versions.env
. "$cp_modules/versions.env"

export GOMODCACHE="${EGRESS_GOMODCACHE:-$HOME/.cache/egress-proxies/go/mod}"
export GOCACHE="${EGRESS_GOCACHE:-$HOME/.cache/egress-proxies/go/build}"
# Both releases declare `go 1.26.0`: the installed Go builds them, and nothing may fetch a toolchain.
export GOTOOLCHAIN=local
# Static binaries, as upstream ships kube-apiserver, kubectl and etcd; no C toolchain needed.
export CGO_ENABLED=0
# VCS stamping would describe this repository, not the release being built.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

# Staging modules are published as v0.<minor>.<patch> of the v1.<minor>.<patch> release.
staging_version="v0.${KUBERNETES_VERSION#v1.}"

control_plane_dir="${EGRESS_CONTROL_PLANE_DIR:-$HOME/.cache/egress-proxies/control-plane/$KUBERNETES_VERSION}"

if ! command -v go >/dev/null 2>&1; then
  echo "error: 'go' is not on PATH; the control plane is built from Go modules (Go >= 1.26)" >&2
  exit 1
fi
