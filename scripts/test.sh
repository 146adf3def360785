#!/usr/bin/env bash
# The project's test command (README.md): format, lints, the e2e control plane (built once, cached), then
# every test in the workspace.
# Build output goes to a cache outside the clone so fresh clones reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/egress-proxies/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Incremental compilation pays off only while editing; in a test run it only fills the disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== system packages the tests need"
scripts/install-test-deps.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
# The e2e tests start a real etcd + kube-apiserver (tests/support); build them unless cached.
echo "== control plane for the e2e tests"
scripts/build-control-plane.sh
# The README's first command, end to end and stopping by itself: proves the demo a newcomer runs works.
echo "== the local demo, once (scripts/demo.sh --once --local)"
scripts/demo.sh --once --local
echo "== cargo test"
cargo test --workspace --all-features --locked
