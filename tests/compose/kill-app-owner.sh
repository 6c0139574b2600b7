#!/usr/bin/env bash
# SIGKILLs the data-worker container of compose project $1 that owns app $2
# (as `sasha admin apps placement --json` in studio-core says), and its
# replicator with it, as a lost node loses both. Writes "WORKER EPOCH" of the
# killed owner to $3. Run by tests/mcp-client/compose.mjs, for
# deploy/test-compose.sh.
set -euo pipefail
project="$1" app="$2" out="$3"
# The first of studio-core's replicas. Not `| head -n 1`: with two replicas
# podman may still be writing the second name when head has exited, and
# under pipefail that SIGPIPE ends this script without a word.
cores=$(podman ps --filter "label=io.podman.compose.project=$project" \
  --filter "label=io.podman.compose.service=studio-core" --format '{{.Names}}')
core=${cores%%$'\n'*}
# Again, for up to 60 s, while `sasha admin` cannot reach PostgreSQL or
# `podman exec` itself fails (deploy/test-compose.sh says why), or the app is
# between owners; each failure is printed.
worker=""
until [ -n "$worker" ]; do
  if podman exec "$core" sasha admin apps placement --json > "$out.placement" 2> "$out.log"; then
    python3 -c 'import json, sys
for line in sys.stdin:
    row = json.loads(line)
    if row["appId"] == sys.argv[1] and row.get("workerId"):
        print(row["workerId"], row["epoch"])' "$app" < "$out.placement" > "$out"
    read -r worker _ < "$out" || true
    [ -n "$worker" ] && break
    echo "kill-app-owner: app $app is placed nowhere yet; the placements:" >&2
    cat "$out.placement" >&2
  else
    echo "kill-app-owner: sasha admin apps placement failed:" >&2
    cat "$out.log" >&2
  fi
  [ "$SECONDS" -lt 60 ] || exit 1
  # Between attempts: podman exec's own stalls last about 5 s on this
  # machine type, and a lease is granted within one renewal (1 s).
  sleep 1
done
# Each worker is the service of its own name (compose.yaml).
for service in "$worker" "$worker-replicator"; do
  for name in $(podman ps --filter "label=io.podman.compose.project=$project" \
    --filter "label=io.podman.compose.service=$service" --format '{{.Names}}'); do
    podman kill --signal KILL "$name" > /dev/null
  done
done
