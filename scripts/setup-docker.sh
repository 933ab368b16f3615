#!/usr/bin/env bash
# Brings up a Docker Engine that Worldline can drive: installs Debian's docker.io and debootstrap
# when missing, starts dockerd without a bridge (these machines have no docker0; builds use host
# networking, test containers none), waits until the daemon answers, and checks the storage driver.
# Shared by the README's demo command and .ci/run so both see the same engine.
set -euo pipefail

log() { printf 'setup-docker: %s\n' "$*" >&2; }

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
command -v git >/dev/null 2>&1 || need_pkgs+=(git)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  log "installing ${need_pkgs[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
  log "a Docker daemon already answers"
else
  log "starting dockerd --bridge=none"
  mkdir -p /var/log
  nohup dockerd --bridge=none >/var/log/worldline-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    log "dockerd did not answer within 60 s; its log follows"
    tail -n 40 /var/log/worldline-dockerd.log >&2 || true
    exit 1
  fi
fi

driver=$(docker info --format '{{.Driver}}')
if [ "$driver" != "overlay2" ]; then
  log "WARNING: storage driver is '$driver', not overlay2: image builds will be slow and use much more disk."
  log "         (overlay2 needs a kernel with overlayfs and a backing filesystem that supports d_type.)"
else
  log "docker is up (storage driver overlay2, server $(docker version --format '{{.Server.Version}}'))"
fi
