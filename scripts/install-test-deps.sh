#!/usr/bin/env bash
# System packages and tools the tests need beyond Rust and Go. Does nothing for what is already there.
#   - tinyproxy, which the host provider's tests run on loopback addresses (Debian package `tinyproxy`);
#   - moto, the AWS EC2 emulator the AWS provider's tests run in server mode on 127.0.0.1 (PyPI
#     `moto[server,ec2]`), installed into its own virtualenv (Debian's Python refuses system-wide pip
#     installs) whose `moto_server` the tests find at $MOTO_VENV/bin, or on the PATH.
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    $sudo apt-get update
    apt_updated=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}

here="$(cd "$(dirname "$0")" && pwd)"
if [ -f "$here/install-tinyproxy.sh" ]; then
  bash "$here/install-tinyproxy.sh"
elif [ ! -x /usr/bin/tinyproxy ]; then
  apt_install tinyproxy
fi

MOTO_VENV="${MOTO_VENV:-$HOME/.cache/egress-proxies/moto-venv}"
if ! command -v moto_server >/dev/null 2>&1 && [ ! -x "$MOTO_VENV/bin/moto_server" ]; then
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    apt_install python3 python3-venv
  fi
  python3 -m venv "$MOTO_VENV"
  "$MOTO_VENV/bin/pip" install --quiet 'moto[server,ec2]>=5,<6'
fi
