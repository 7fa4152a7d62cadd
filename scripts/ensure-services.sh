#!/usr/bin/env bash
# Make sure the PostgreSQL server the tests use is up; start it if this machine has it stopped.
set -uo pipefail
if command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432; then
  exit 0
fi
if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 -p 5432 && exit 0
    sleep 1
  done
fi
echo "PostgreSQL is not reachable at 127.0.0.1:5432; the PostgreSQL tests will fail." >&2
exit 0
