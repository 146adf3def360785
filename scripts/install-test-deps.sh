#!/usr/bin/env bash
# System packages the tests need beyond Rust and Go: tinyproxy, which the host provider's tests run on
# loopback addresses (Debian package `tinyproxy`). Does nothing when it is already there.
set -euo pipefail
if [ ! -x /usr/bin/tinyproxy ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tinyproxy
fi
