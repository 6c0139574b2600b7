#!/usr/bin/env bash
# SIGKILLs the mcp-gateway container of compose project $1 that served the
# most /mcp requests since $2 (RFC 3339): the writers' gateway, since a
# client's requests hash to one replica by its credential. Writes "COUNT NAME"
# of the one it killed to $3. Run by tests/mcp-client/compose.mjs, for
# deploy/test-compose.sh.
set -euo pipefail
project="$1" since="$2" out="$3"
for name in $(podman ps --filter "label=io.podman.compose.project=$project" \
  --filter "label=io.podman.compose.service=mcp-gateway" --format '{{.Names}}'); do
  printf '%s %s\n' "$(podman logs --since "$since" "$name" 2>&1 | grep -c ' path=/mcp ' || true)" "$name"
done | sort -n | tail -n 1 > "$out"
podman kill --signal KILL "$(cut -d' ' -f2 "$out")" > /dev/null
