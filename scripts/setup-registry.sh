#!/usr/bin/env bash
# Installs Debian's docker-registry (the CNCF distribution registry) when missing: the registry
# tests start their own on loopback with a free port, a temporary storage folder and a config of
# their own (test/registry.test.ts); nothing here runs it as a service.
set -euo pipefail

if command -v docker-registry >/dev/null 2>&1; then
  printf 'setup-registry: %s\n' "$(docker-registry --version 2>/dev/null | head -n 1)" >&2
  exit 0
fi
printf 'setup-registry: installing docker-registry from Debian\n' >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
# Debian's package starts a system service on 5000: the tests do not use it.
(systemctl disable --now docker-registry 2>/dev/null || service docker-registry stop 2>/dev/null || true) >/dev/null
