#!/usr/bin/env bash
# The local demo (README.md). Today it shows the provider side of the system: it builds the fake provider
# daemon and the conformance CLI, serves the fake on a unix socket, and checks it against the provider
# contract. It grows into the full operator demo (control plane, operator, host provider, a Proxy carrying
# traffic) as those parts land.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/egress-proxies/target}"
bin="$CARGO_TARGET_DIR/debug"

echo "== building egress-provider-fake and provider-conformance"
cargo build --locked -p egress-provider-fake -p provider-conformance

work="$(mktemp -d)"
socket="$work/fake.sock"
"$bin/egress-provider-fake" --config examples/provider-fake.yaml --listen "unix://$socket" --log-format text \
  >"$work/provider.log" 2>&1 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.1; done

echo "== provider-conformance --endpoint unix://$socket"
"$bin/provider-conformance" --endpoint "unix://$socket"
echo
echo "== the provider's log (one line per call)"
tail -n 5 "$work/provider.log"
