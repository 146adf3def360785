#!/usr/bin/env bash
# The local demo (README.md): a control plane (unless the kubeconfig names a reachable cluster), the
# operator, the host provider on loopback addresses, a Proxy applied with kubectl, and an HTTP request
# through it. Stays up until Ctrl-C. `--once` stops after the request; `--local` ignores the kubeconfig.
# The same as `cargo xtask demo`, with the build cache outside the clone (~/.cache/egress-proxies).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/egress-proxies/target}"
exec cargo run --locked --package xtask -- demo "$@"
