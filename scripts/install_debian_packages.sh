#!/usr/bin/env bash
# Install the Debian packages the integration tests start, in one apt transaction:
#   slurm  — a real single-node Slurm cluster with accounting (slurm-wlm, munge, slurmdbd, mariadb-server);
#            tests/experiments/conftest.py starts and stops the daemons by PID (../shared/STACK.md).
#   chrome — headless Chromium + chromium-driver for the report tests (tests/notebooks/test_browser.py).
# Usage: scripts/install_debian_packages.sh [slurm] [chrome]   (both when no argument is given)
# Idempotent: does nothing when every package is installed. Needs root (CI runs as root); as another user it
# prints what is missing and exits 0, so `make test` still runs (those tests skip outside CI, fail in CI).
set -euo pipefail

groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(slurm chrome)
packages=()
for group in "${groups[@]}"; do
    case "$group" in
        slurm) packages+=(slurm-wlm munge slurmdbd mariadb-server) ;;
        chrome) packages+=(chromium chromium-driver) ;;
        *) echo "install_debian_packages: unknown group '$group' (use slurm, chrome)" >&2; exit 2 ;;
    esac
done

missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install_debian_packages: already installed (${packages[*]})"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_debian_packages: not root, skipping ${missing[*]} (their tests skip here; run as root to install)" >&2
    exit 0
fi

echo "install_debian_packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_debian_packages: done"
