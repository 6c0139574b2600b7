#!/usr/bin/env bash
# SIGKILLs the data-worker container of compose project $1 that owns app $2
# (as `sasha admin apps placement --json` in studio-core says), and its
# replicator with it, as a lost node loses both. Writes "WORKER EPOCH" of the
# killed owner to $3. Run by tests/mcp-client/compose.mjs, for
# deploy/test-compose.sh.
set -euo pipefail
project="$1" app="$2" out="$3"
core=$(podman ps --filter "label=io.podman.compose.project=$project" \
  --filter "label=io.podman.compose.service=studio-core" --format '{{.Names}}' | head -n 1)
# Again, for up to 60 s, while `sasha admin` cannot reach PostgreSQL or
# `podman exec` itself fails (deploy/test-compose.sh says why); each failure
# is printed.
until podman exec "$core" sasha admin apps placement --json > "$out.placement" 2> "$out.log"; do
  echo "kill-app-owner: sasha admin apps placement failed; asking again:" >&2
  cat "$out.log" >&2
  [ "$SECONDS" -lt 60 ] || exit 1
  # podman exec's own stalls last about 5 s on this machine type.
  sleep 1
done
python3 -c 'import json, sys
for line in sys.stdin:
    row = json.loads(line)
    if row["appId"] == sys.argv[1]:
        print(row["workerId"], row["epoch"])' "$app" < "$out.placement" > "$out"
read -r worker _ < "$out"
[ -n "$worker" ] || { echo "app $app is placed nowhere" >&2; exit 1; }
# Each worker is the service of its own name (compose.yaml).
for service in "$worker" "$worker-replicator"; do
  for name in $(podman ps --filter "label=io.podman.compose.project=$project" \
    --filter "label=io.podman.compose.service=$service" --format '{{.Names}}'); do
    podman kill --signal KILL "$name" > /dev/null
  done
done
