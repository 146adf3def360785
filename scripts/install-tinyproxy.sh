#!/usr/bin/env bash
# Installs tinyproxy (Debian package), which the host provider runs: used by the demo and by
# scripts/install-test-deps.sh. Does nothing when it is already there.
set -euo pipefail
[ -x /usr/bin/tinyproxy ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "   installing tinyproxy with apt-get"
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tinyproxy
