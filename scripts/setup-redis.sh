#!/usr/bin/env bash
# Installs Debian's redis-server when missing: the queue tests and bench:queue start their own
# server on loopback with a free port (bench/redis_server.ts); nothing here runs it as a service.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
  printf 'setup-redis: %s\n' "$(redis-server --version 2>/dev/null | cut -d' ' -f1-3)" >&2
  exit 0
fi
printf 'setup-redis: installing redis-server from Debian\n' >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends redis-server >/dev/null
# Debian's package starts a system service on 6379: the tests do not use it.
(systemctl disable --now redis-server 2>/dev/null || service redis-server stop 2>/dev/null || true) >/dev/null
