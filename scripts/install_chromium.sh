#!/usr/bin/env bash
# Install Debian's headless browser for the report tests: chromium + chromium-driver (Selenium's driver),
# as ../shared/STACK.md describes. Idempotent: does nothing when both are already installed.
# Needs root (CI runs as root). Tests start chromium themselves with the closed-network flags
# (tests/notebooks/test_reports_browser.py); nothing is started here and no browser is ever downloaded.
set -euo pipefail

PACKAGES=(chromium chromium-driver)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install_chromium: already installed (${PACKAGES[*]})"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install_chromium: missing ${missing[*]}; run as root (or: sudo $0)" >&2
    exit 1
fi

echo "install_chromium: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_chromium: done ($(chromium --version 2>/dev/null || echo 'chromium installed'))"
