#!/usr/bin/env bash
# Install the Debian packages the Slurm tests need: a real single-node cluster
# (slurm-wlm + munge) with accounting (slurmdbd + mariadb-server), as ../shared/STACK.md describes.
# Idempotent: does nothing when every package is already installed. Needs root (CI runs as root).
# The packages' daemons are NOT started here (Debian's policy-rc.d blocks that in containers);
# tests/experiments/conftest.py starts and stops them by PID.
set -euo pipefail

PACKAGES=(slurm-wlm munge slurmdbd mariadb-server)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install_slurm: already installed (${PACKAGES[*]})"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install_slurm: missing ${missing[*]}; run as root (or: sudo $0)" >&2
    exit 1
fi

echo "install_slurm: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_slurm: done"
