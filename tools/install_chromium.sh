#!/usr/bin/env bash
# Debian's Chromium for the report's browser test (tests/integration/test_report_browser.py).
# Called by `make test`. Installs with apt-get when Chromium is missing and this runs as root
# (as CI does); otherwise says what to run. Playwright drives this binary and downloads no browser.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "tools/install_chromium.sh: chromium is missing; run 'sudo apt-get install -y chromium'" \
         "(the browser test skips without it, and fails under CI=true)" >&2
    exit 0
fi
echo "tools/install_chromium.sh: installing Debian's chromium for the browser test" >&2
export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes    # no "delaying package configuration" notice
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
chromium --version 2>/dev/null      # the version; not the launcher script's own complaints (/etc/chromium.d)
