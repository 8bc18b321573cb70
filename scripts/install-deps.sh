#!/usr/bin/env bash
# Installs the Debian packages parallax needs, when missing. As root it runs
# apt-get; otherwise it prints the exact command to run and fails.
set -euo pipefail

pkgs=(build-essential cmake pkg-config libcjson-dev libcunit1-dev libopenblas-dev
      libopenmpi-dev openmpi-bin gnuplot-nox chromium jq python3 clang libclang-rt-dev)
# Extras named on the command line are installed too.
pkgs+=("$@")

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: missing packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: not root; run:"
  echo "  sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
