#!/usr/bin/env bash
# Installs Debian's chromium when missing: the audit report test opens the --html report in it
# (headless, driven by playwright-core with executablePath /usr/bin/chromium).
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  printf 'setup-chromium: %s\n' "$(chromium --version 2>/dev/null || echo 'chromium present')" >&2
  exit 0
fi
printf 'setup-chromium: installing chromium from Debian\n' >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
