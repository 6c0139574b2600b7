#!/usr/bin/env python3
"""Validates the deployment files with real validators, then checks that they
agree with each other and with the platform's rules.

    validate.py [--root DIR] [--tls-cert FILE --tls-key FILE] [PART ...]

PART is any of dockerfile, compose, kubernetes, caddy (default: all). Prints one
line per check group and every problem found; exits 1 if there was any.

- dockerfile: Dockerfile parsed by BuildKit's parser (PyPI `dockerfile`);
  .dockerignore.
- compose: deploy/compose.yaml against the Compose Specification's JSON schema
  (as vendored by PyPI `check-jsonschema`), as written and after interpolating
  its defaults; then the layout rules (named volumes only, separate state
  volumes, the PostgreSQL core database and its secrets, studio-core and the
  gateway scalable, several data-workers holding leases, each with its own
  name, volume, replicator and address, hardening, certificates, origins,
  the proxy's template variables).
- kubernetes: every document under deploy/k8s/ against the Kubernetes JSON
  schemas of several versions (PyPI `kubernetes-validate`, strict: unknown
  fields are errors); then the same layout rules across the objects (the
  core database from a Secret, replicas spread over nodes with disruption
  budgets, shared volumes ReadWriteMany, the replicator as a native
  sidecar, data-workers as a StatefulSet of several pods named by the
  downward API, each with its own volume and replication on).
- caddy: `caddy validate` and `caddy adapt` of deploy/caddy/Caddyfile (Debian's
  caddy) with every placeholder set, then the adapted routes and headers.
  Needs --tls-cert/--tls-key: a certificate for the two example hostnames.

tests/process/deploy_files.rs runs it with the venv scripts/test.sh installs from
tests/deploy/requirements.txt.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

# The Kubernetes versions the manifests must be valid for: an older one still
# widely run and the newest the schemas ship.
KUBERNETES_VERSIONS = ["1.31.0", "1.37.0"]

# Where the image keeps each state folder (Dockerfile ENV; compose and k8s must
# agree).
STORAGE_VARS = ["DB_PATH", "DOCS_ROOT", "APP_DATA_ROOT", "UPLOADS_ROOT"]

# The state folders each role opens (README.md, "Configuration"). The core
# database (DB_PATH's folder, DB_DIR) is not among them: the deployments put
# it on PostgreSQL (CORE_DATABASE_FILE below), which every studio-core
# replica shares; the SQLite file is for one process (`sasha up`).
ROLE_FOLDERS = {
    "studio-core": [],
    "data-worker": ["APP_DATA_ROOT"],
    "mcp-gateway": [],
    "edge-sandbox": [],
}

# The folders a role keeps as a working copy of what the core database holds
# (docs/decisions/0042-package-heads.md): one of its own per replica, on
# memory (a Compose tmpfs, a Kubernetes emptyDir), never a shared or
# persistent volume, so no replica needs a disk another can reach.
ROLE_WORKING_COPIES = {
    "studio-core": ["DOCS_ROOT"],
}

# The listen address variables of each role.
ROLE_LISTENERS = {
    "studio-core": ["SASHA_CORE_HTTP_ADDR", "SASHA_CORE_GRPC_ADDR"],
    "data-worker": ["SASHA_DATA_GRPC_ADDR"],
    "mcp-gateway": ["SASHA_GATEWAY_HTTP_ADDR"],
    "edge-sandbox": ["SASHA_EDGE_ADDR"],
}

# The roles that hold an mTLS identity.
GRPC_ROLES = ["studio-core", "data-worker", "mcp-gateway"]

# The roles that own SQLite databases, each replicated by a Litestream sidecar
# (`sasha litestream --socket <folder>/.litestream.sock`) on the volume of
# this folder (docs/operating.md, "Replication"). studio-core's core database
# is PostgreSQL, which keeps itself: studio-core refuses SASHA_REPLICA_URL
# beside DATABASE_URL, so it must see that variable unset or empty.
REPLICATED_ROLES = {"data-worker": "APP_DATA_ROOT"}
# The socket a role looks for in that folder (sasha-replica's SOCKET_NAME).
REPLICA_SOCKET_NAME = ".litestream.sock"
# The object storage credentials a role and its replicator share.
REPLICA_CREDENTIALS = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]

# The core database on PostgreSQL: studio-core (and every process that opens
# the core database) reads the URL, password included, from the file
# DATABASE_URL_FILE names, a mounted secret; DATABASE_URL itself is never
# written into a deployment file. studio-core runs at least CORE_MIN_REPLICAS.
CORE_DATABASE_FILE = "DATABASE_URL_FILE"
CORE_DATABASE_URL = "DATABASE_URL"
CORE_MIN_REPLICAS = 2
# Compose's PostgreSQL: the image (a variable with this default), its data
# folder (the image's PGDATA), and the variables its entrypoint reads.
POSTGRES_SERVICE = "postgres"
POSTGRES_DEFAULT_IMAGE = "postgres:15"
POSTGRES_DATA = "/var/lib/postgresql/data"
# A URL with a password in it: postgres://user:password@…
URL_WITH_PASSWORD = re.compile(r"postgres(?:ql)?://[^/@\s]*:[^/@\s]+@")

# Which gRPC URL names which role, and that role's listen variable.
GRPC_URLS = {
    "SASHA_CORE_GRPC_URL": ("studio-core", "SASHA_CORE_GRPC_ADDR"),
}

# Several data-workers (docs/operating.md, "Several data-workers"): the roles
# that take part in the placement run with SASHA_DATA_PLACEMENT=leases, and
# none is given the one worker's SASHA_DATA_GRPC_URL (leases ignore it: each
# app's owner is asked of studio-core). Each worker has its own name
# (SASHA_DATA_WORKER_ID), renews its lease with studio-core
# (SASHA_CORE_GRPC_URL), advertises its own address
# (SASHA_DATA_ADVERTISE_URL) and keeps its apps on a volume of its own,
# replicated: a worker taking over a lost one's apps restores them from
# object storage.
PLACEMENT = "SASHA_DATA_PLACEMENT"
PLACEMENT_LEASES = "leases"
PLACEMENT_ROLES = ["studio-core", "data-worker", "mcp-gateway"]
SINGLE_WORKER_URL = "SASHA_DATA_GRPC_URL"
WORKER_ID = "SASHA_DATA_WORKER_ID"
ADVERTISE_URL = "SASHA_DATA_ADVERTISE_URL"
DATA_WORKERS_MIN = 2

# The variables the nginx template and the compose proxy agree on.
NGINX_TEMPLATE_VARS = {
    "SASHA_STUDIO_HOST",
    "SASHA_SANDBOX_HOST",
    "SASHA_LISTEN",
    "SASHA_TLS_CERT_FILE",
    "SASHA_TLS_KEY_FILE",
    "STUDIO_CORE_SERVERS",
    "EDGE_SANDBOX_HTTP",
    "MCP_GATEWAY_SERVERS",
}
# The template variables holding `server host:port;` lines, one per replica
# of a role, and the role's HTTP listen variable.
NGINX_SERVER_VARS = {
    "STUDIO_CORE_SERVERS": ("studio-core", "SASHA_CORE_HTTP_ADDR"),
    "MCP_GATEWAY_SERVERS": ("mcp-gateway", "SASHA_GATEWAY_HTTP_ADDR"),
}
NGINX_ENVSUBST_FILTER = "^(SASHA_|STUDIO_|EDGE_|MCP_)"

# The Caddyfile's placeholders and the values `caddy validate` runs with.
CADDY_STUDIO_HOST = "studio.example.com"
CADDY_SANDBOX_HOST = "views.example.net"
CADDY_ENV = {
    "SASHA_STUDIO_HOST": CADDY_STUDIO_HOST,
    "SASHA_SANDBOX_HOST": CADDY_SANDBOX_HOST,
    "STUDIO_CORE_UPSTREAMS": "studio-core-1:3011 studio-core-2:3011",
    "EDGE_SANDBOX_HTTP": "edge-sandbox:3010",
    "MCP_GATEWAY_UPSTREAMS": "mcp-gateway-1:3014 mcp-gateway-2:3014",
}
MIB = 1024 * 1024

# RFC 9728: the MCP resource's protected resource metadata, served by
# mcp-gateway on the Studio host (the exact path and every path below it).
OAUTH_RESOURCE_METADATA = "/.well-known/oauth-protected-resource"


class Problems:
    """Collects what is wrong, grouped by the check that found it."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.found.append(f"{where}: {message}")

    def check(self, ok: bool, where: str, message: str) -> bool:
        if not ok:
            self.add(where, message)
        return ok


# ---------------------------------------------------------------------------
# Shared helpers


def site_of(host: str) -> str:
    """The last two labels of a hostname: the registrable domain of the names
    these files use (an approximation of the Public Suffix List's eTLD+1)."""
    return ".".join(host.lower().rstrip(".").split(".")[-2:])


def origin_host(origin: str) -> str | None:
    match = re.fullmatch(r"https?://([^/:?#]+)(:\d+)?", origin or "")
    return match.group(1) if match else None


def nested(a: str, b: str) -> bool:
    """Whether folder a is b or inside b, or b inside a."""
    a, b = posixpath.normpath(a), posixpath.normpath(b)
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def addr_port(addr: str) -> int | None:
    match = re.fullmatch(r"(?:\[[0-9a-fA-F:]+\]|[^:]+):(\d+)", addr or "")
    return int(match.group(1)) if match else None


def storage_folders(env: dict[str, str]) -> dict[str, str]:
    """DB_DIR (the core database's folder), DOCS_ROOT, APP_DATA_ROOT,
    UPLOADS_ROOT, as configured."""
    return {
        "DB_DIR": posixpath.dirname(env.get("DB_PATH", "")),
        "DOCS_ROOT": env.get("DOCS_ROOT", ""),
        "APP_DATA_ROOT": env.get("APP_DATA_ROOT", ""),
        "UPLOADS_ROOT": env.get("UPLOADS_ROOT", ""),
    }


def check_storage_layout(p: Problems, where: str, env: dict[str, str]) -> None:
    """All four paths set, absolute, and no folder inside another."""
    for var in STORAGE_VARS:
        value = env.get(var, "")
        p.check(value.startswith("/"), where, f"{var} must be an absolute path, is {value!r}")
    folders = storage_folders(env)
    names = list(folders)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if folders[a] and folders[b]:
                p.check(
                    not nested(folders[a], folders[b]),
                    where,
                    f"{a} ({folders[a]}) and {b} ({folders[b]}) must be separate folders, "
                    "neither inside the other",
                )


def schema_errors(validator: jsonschema.protocols.Validator, document: object) -> list[str]:
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{e.json_path}: {e.message}" for e in errors]


# ---------------------------------------------------------------------------
# Dockerfile


def check_dockerfile(root: Path, p: Problems) -> dict[str, str]:
    """Returns the runtime stage's ENV."""
    import dockerfile  # BuildKit's parser

    where = "Dockerfile"
    commands = dockerfile.parse_file(str(root / "Dockerfile"))
    args: dict[str, str] = {}
    stages: list[dict] = []
    for command in commands:
        if command.cmd == "ARG" and not stages:
            for item in command.value:
                name, _, default = item.partition("=")
                args[name] = default
        if command.cmd == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), command.value[0])
            name = command.value[2] if len(command.value) > 2 else ""
            stages.append({"image": image, "name": name, "commands": []})
        elif stages:
            stages[-1]["commands"].append(command)
    by_name = {stage["name"]: stage for stage in stages}
    expected = ["litestream", "build", "base", "prebuilt", "runtime"]
    if not p.check(
        [stage["name"] for stage in stages] == expected,
        where,
        f"expected the stages {expected} (the default target last), found {[stage['name'] for stage in stages]}",
    ):
        return {}
    build, base = by_name["build"], by_name["base"]
    p.check(build["image"] == "rust:1.95-bookworm", where, f"the build stage is {build['image']}, not rust:1.95-bookworm")
    p.check(
        by_name["litestream"]["image"] == "litestream/litestream:0.5.17",
        where,
        f"LITESTREAM_IMAGE defaults to {by_name['litestream']['image']}, not litestream/litestream:0.5.17",
    )
    p.check(
        base["image"] in ("debian:bookworm-slim", "gcr.io/distroless/cc-debian12"),
        where,
        f"the runtime base is {base['image']}",
    )
    runs = " ".join(" ".join(c.value) for c in build["commands"] if c.cmd == "RUN")
    p.check(
        re.search(r"cargo build --release --locked --bin sasha\b", runs) is not None,
        where,
        "the build stage must run `cargo build --release --locked --bin sasha`",
    )
    # The two targets add the binary to the base, and nothing else.
    for name, source in (("prebuilt", None), ("runtime", "build")):
        stage = by_name[name]
        copies = [c for c in stage["commands"]]
        p.check(stage["image"] == "base", where, f"the {name} stage must start from base")
        p.check(
            len(copies) == 1
            and copies[0].cmd == "COPY"
            and copies[0].value[-1] == "/usr/local/bin/sasha"
            and (source is None) == (not any(flag.startswith("--from=") for flag in copies[0].flags))
            and (source is None or f"--from={source}" in copies[0].flags),
            where,
            f"the {name} stage must only COPY the sasha binary{' from the ' + source + ' stage' if source else ' from its context'}",
        )
    runtime = base
    by_cmd: dict[str, list] = {}
    for command in runtime["commands"]:
        by_cmd.setdefault(command.cmd, []).append(command)
    for forbidden in ("HEALTHCHECK", "VOLUME", "ADD"):
        p.check(forbidden not in by_cmd, where, f"the runtime stage must have no {forbidden}")
    user = [c.value[0] for c in by_cmd.get("USER", [])]
    p.check(user[-1:] == ["10001:10001"], where, f"the runtime user must be 10001:10001, is {user[-1:]}")
    entrypoint = by_cmd.get("ENTRYPOINT", [])
    p.check(
        len(entrypoint) == 1 and entrypoint[0].json and list(entrypoint[0].value) == ["sasha"],
        where,
        'ENTRYPOINT must be the exec form ["sasha"]',
    )
    cmd = by_cmd.get("CMD", [])
    p.check(
        len(cmd) == 1 and cmd[0].json and list(cmd[0].value)[:1] == ["serve"],
        where,
        'CMD must be the exec form ["serve", "<role>"]',
    )
    p.check(
        [c.value[0] for c in by_cmd.get("STOPSIGNAL", [])] == ["SIGTERM"],
        where,
        "STOPSIGNAL must be SIGTERM",
    )
    labels = {}
    for command in by_cmd.get("LABEL", []):
        values = list(command.value)
        for key, value in zip(values[::2], values[1::2]):
            labels[key] = value.strip('"')
    for key in ("title", "description", "version", "revision", "licenses"):
        p.check(f"org.opencontainers.image.{key}" in labels, where, f"missing the OCI label org.opencontainers.image.{key}")
    env: dict[str, str] = {}
    for command in by_cmd.get("ENV", []):
        values = list(command.value)
        for key, value in zip(values[::2], values[1::2]):
            env[key] = value
    check_storage_layout(p, where + " ENV", env)
    for role, variables in ROLE_LISTENERS.items():
        for var in variables + ["SASHA_HEALTH_ADDR"]:
            p.check(env.get(var, "").startswith("0.0.0.0:"), where, f"ENV {var} must listen on 0.0.0.0 in a container")

    ignore = (root / ".dockerignore").read_text().split("\n")
    patterns = {line.strip() for line in ignore if line.strip() and not line.startswith("#")}
    for needed in ("**/target", "**/node_modules", "**/.sasha", ".git"):
        p.check(needed in patterns, ".dockerignore", f"must exclude {needed}")
    return env


# ---------------------------------------------------------------------------
# Compose

INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>(?:[^{}]|\{[^{}]*\})*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(value: object, unset: list[str], required: list[str]) -> object:
    """The document as Compose sees it with no variable set: every
    `${VAR:-default}` becomes its default. Records variables without a default
    (`unset`) and required ones (`required`)."""
    if isinstance(value, dict):
        return {k: interpolate(v, unset, required) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, unset, required) for v in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match) -> str:
        if match.group("escaped"):
            return "$"
        name = match.group("braced") or match.group("named")
        op, arg = match.group("op"), match.group("arg") or ""
        if op in ("-", ":-"):
            return str(interpolate(arg, unset, required))
        if op in ("?", ":?"):
            required.append(name)
            return ""
        if op in ("+", ":+"):
            return ""
        unset.append(name)
        return ""

    return INTERPOLATION.sub(replace, value)


def compose_schema() -> dict:
    vendored = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads((vendored / "compose-spec.json").read_text())


def service_env(service: dict) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        pairs = [item.split("=", 1) for item in environment]
        return {k: (v[0] if v else "") for k, *v in pairs}
    return {k: "" if v is None else str(v) for k, v in environment.items()}


def service_role(service: dict) -> str | None:
    command = service.get("command")
    if isinstance(command, str):
        command = command.split()
    if isinstance(command, list) and command[:1] == ["serve"] and len(command) == 2:
        return command[1]
    if isinstance(command, list) and command[:1] in (["certs"], ["backup"]):
        return command[0]
    return None


def service_tmpfs(service: dict) -> list[str]:
    """The service's tmpfs mounts (`tmpfs:` as a string or a list, each
    `path[:options]`)."""
    tmpfs = service.get("tmpfs") or []
    return [tmpfs] if isinstance(tmpfs, str) else [str(entry) for entry in tmpfs]


def service_mounts(where: str, service: dict, volumes: dict, p: Problems) -> list[dict]:
    """Each entry of `volumes` as {source, target, read_only}; anything that is
    not a named volume of the top-level list is a problem."""
    mounts = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, str):
            parts = entry.split(":")
            if len(parts) == 1:
                p.add(where, f"{entry!r} is an anonymous volume; use a named one")
                continue
            source, target = parts[0], parts[1]
            mode = parts[2] if len(parts) > 2 else ""
            kind = "bind" if source.startswith(("/", ".", "~")) else "volume"
            read_only = "ro" in mode.split(",")
        else:
            kind = entry.get("type", "volume")
            source, target = entry.get("source", ""), entry.get("target", "")
            read_only = bool(entry.get("read_only"))
        if kind != "volume" or not source:
            p.add(where, f"mount of {target} is a {kind} mount; only named volumes are allowed")
            continue
        p.check(source in volumes, where, f"volume {source!r} is not in the top-level volumes")
        mounts.append({"source": source, "target": posixpath.normpath(target), "read_only": read_only})
    targets = [m["target"] for m in mounts]
    for i, a in enumerate(targets):
        for b in targets[i + 1 :]:
            p.check(not nested(a, b), where, f"mounts at {a} and {b} nest")
    return mounts


def service_secrets(service: dict) -> dict[str, str]:
    """The secrets a service mounts: {path in the container: secret name}.
    Compose mounts a secret at /run/secrets/<target>, the target defaulting
    to its name; an absolute target is the path itself."""
    paths = {}
    for entry in service.get("secrets") or []:
        source = entry if isinstance(entry, str) else entry.get("source", "")
        target = source if isinstance(entry, str) else entry.get("target") or source
        paths[target if target.startswith("/") else posixpath.join("/run/secrets", target)] = source
    return paths


def git_ignores_everything(folder: Path) -> bool:
    """Whether folder/.gitignore ignores every file in it but itself."""
    ignore = folder / ".gitignore"
    if not ignore.is_file():
        return False
    lines = {line.strip() for line in ignore.read_text().splitlines() if line.strip() and not line.startswith("#")}
    return "*" in lines


def volume_at(mounts: list[dict], path: str) -> dict | None:
    """The mount holding path (the deepest one)."""
    best = None
    for mount in mounts:
        target = mount["target"]
        if path == target or path.startswith(target + "/"):
            if best is None or len(target) > len(best["target"]):
                best = mount
    return best


def check_compose(root: Path, p: Problems, image_env: dict[str, str]) -> None:
    path = root / "deploy" / "compose.yaml"
    where = "deploy/compose.yaml"
    raw = yaml.safe_load(path.read_text())
    validator = jsonschema.Draft202012Validator(compose_schema())
    for error in schema_errors(validator, raw):
        p.add(where + " (as written)", error)
    unset: list[str] = []
    required: list[str] = []
    doc = interpolate(raw, unset, required)
    for error in schema_errors(validator, doc):
        p.add(where + " (interpolated)", error)
    p.check(not unset, where, f"variables without a default (compose would warn and blank them): {sorted(set(unset))}")
    p.check(not required, where, f"variables that must be set: {sorted(set(required))}; give them defaults")

    services: dict = doc.get("services") or {}
    volumes: dict = doc.get("volumes") or {}
    for name in ("certs", POSTGRES_SERVICE, "studio-core", "mcp-gateway", "edge-sandbox", "proxy"):
        p.check(name in services, where, f"there is no service {name}")
    p.check("certs" in volumes, where, "there is no named volume certs")

    roles: dict[str, str] = {}
    mounts: dict[str, list[dict]] = {}
    aliases: dict[str, str] = {}  # resolvable name -> service
    for name, service in services.items():
        w = f"{where}: service {name}"
        role = service_role(service)
        if role:
            roles[name] = role
        mounts[name] = service_mounts(w, service, volumes, p)
        aliases[name] = name
        networks = service.get("networks") or {}
        if isinstance(networks, dict):
            for network in networks.values():
                for alias in (network or {}).get("aliases") or []:
                    aliases[alias] = name
        # Hardening, everywhere.
        p.check(service.get("read_only") is True, w, "read_only must be true")
        p.check("ALL" in (service.get("cap_drop") or []), w, "cap_drop must include ALL")
        p.check(
            "no-new-privileges:true" in (service.get("security_opt") or []),
            w,
            "security_opt must include no-new-privileges:true",
        )
        p.check("privileged" not in service, w, "must not be privileged")
        for secret in service_secrets(service).values():
            p.check(secret in (doc.get("secrets") or {}), w, f"mounts the secret {secret}, which the top-level secrets do not define")
        # Secrets come from files, never from this file.
        for var, value in service_env(service).items():
            p.check(
                not URL_WITH_PASSWORD.search(value) and not (var.endswith("PASSWORD") and value),
                w,
                f"{var} holds a password; read it from a secret file ({CORE_DATABASE_FILE}, POSTGRES_PASSWORD_FILE)",
            )
        # Only the proxy publishes a port on the host (a port on the host's
        # loopback, such as the trace viewer's, is not reachable from outside).
        for port in service.get("ports") or []:
            published = (
                ":" in str(port) if not isinstance(port, dict) else bool(port.get("published"))
            )
            loopback = str(port).startswith("127.0.0.1:") if not isinstance(port, dict) else port.get("host_ip") == "127.0.0.1"
            if name != "proxy" and not loopback:
                p.check(not published, w, f"publishes {port}; only the proxy is reachable from outside")
    for name, role in roles.items():
        p.check(role in ROLE_FOLDERS or role in ("certs", "backup"), where, f"service {name} runs an unknown role {role}")
    # Traces: an optional profile. The collector and the viewer start only
    # with `--profile traces`; a role exports nowhere unless told to, and
    # then only to the collector.
    if p.check("otel-collector" in services, where, "there is no otel-collector service"):
        for name in ("otel-collector", "jaeger"):
            p.check(
                "traces" in (services.get(name, {}).get("profiles") or []),
                f"{where}: service {name}",
                "must be in the traces profile: its image comes only from a registry",
            )
        for name, role in roles.items():
            if role in ("certs", "backup"):
                continue
            endpoint = service_env(services[name]).get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
            p.check(
                endpoint == "" or endpoint.startswith("http://otel-collector:"),
                f"{where}: service {name}",
                "exports its spans nowhere by default, or to the otel-collector service (OTEL_EXPORTER_OTLP_ENDPOINT)",
            )

    by_role = {role: name for name, role in roles.items()}
    workers = sorted(name for name, role in roles.items() if role == "data-worker")
    p.check(
        len(workers) >= DATA_WORKERS_MIN,
        where,
        f"must run at least {DATA_WORKERS_MIN} data-worker services, runs {workers}",
    )
    # Each worker's volume of APP_DATA_ROOT (checked below).
    worker_volumes: dict[str, str] = {}
    for name in workers:
        folder = storage_folders(service_env(services[name]))["APP_DATA_ROOT"]
        mount = volume_at(mounts[name], folder) if folder else None
        if mount is not None:
            worker_volumes[name] = mount["source"]
    # The scalable roles: several replicas of one service.
    for role in ("studio-core", "mcp-gateway"):
        service = services.get(by_role.get(role, ""), {})
        p.check("container_name" not in service, where, f"{role} must not set container_name: it is scaled")
        p.check(not service.get("ports"), where, f"{role} must publish no port: replicas would collide")

    # Certificates.
    certs_name = by_role.get("certs")
    if p.check(certs_name is not None, where, "no service runs `sasha certs`"):
        certs = services[certs_name]
        p.check(certs.get("command") == ["certs", "--out", "/certs"], where, "the certs job must run `certs --out /certs`")
        p.check(str(certs.get("restart")) == "no", where, 'the certs job must have restart: "no"')
        certs_volume = volume_at(mounts[certs_name], "/certs")
        p.check(certs_volume is not None and not certs_volume["read_only"], where, "the certs job must write /certs")

    # The backup jobs: each sees one data-worker's databases on its volume,
    # and writes only to a volume of the jobs' own; `up` never starts them;
    # every worker's databases have one.
    backups = sorted(name for name, role in roles.items() if role == "backup")
    state_volumes = set(worker_volumes.values()) | {"certs"} | {
        m["source"] for m in mounts.get(POSTGRES_SERVICE, [])
    }
    backed_up: dict[str, list[str]] = {}
    for backup_name in backups:
        w = f"{where}: service {backup_name}"
        backup = services[backup_name]
        env = service_env(backup)
        check_storage_layout(p, w, env)
        p.check("backup" in (backup.get("profiles") or []), w, "must be in a profile, so `up` does not run it")
        command = backup.get("command") or []
        out = posixpath.normpath(command[command.index("--out") + 1]) if "--out" in command[:-1] else ""
        folders = storage_folders(env)
        mount = volume_at(mounts[backup_name], folders["APP_DATA_ROOT"])
        if p.check(
            mount is not None
            and mount["target"] == posixpath.normpath(folders["APP_DATA_ROOT"])
            and mount["source"] in worker_volumes.values(),
            w,
            f"must mount one data-worker's APP_DATA_ROOT volume at {folders['APP_DATA_ROOT']}",
        ):
            backed_up.setdefault(mount["source"], []).append(backup_name)
        p.check(
            volume_at(mounts[backup_name], folders["DB_DIR"]) is None,
            w,
            f"must mount nothing at DB_DIR ({folders['DB_DIR']}): the core database is PostgreSQL",
        )
        target = volume_at(mounts[backup_name], out)
        p.check(
            bool(out) and target is not None and not target["read_only"],
            w,
            f"--out {out!r} must be in a writable named volume",
        )
        if target is not None:
            p.check(target["source"] not in state_volumes, w, "must write to a volume of the backup jobs' own")
        if image_env:
            for var in STORAGE_VARS:
                p.check(env.get(var) == image_env.get(var), w, f"{var} differs from the image's")
    if backups:
        for name, volume in worker_volumes.items():
            p.check(
                len(backed_up.get(volume, [])) == 1,
                f"{where}: service {name}",
                f"its volume {volume} must have exactly one backup job, has {backed_up.get(volume, [])}",
            )

    # Storage: the same layout everywhere, four separate volumes.
    layouts = {}
    folder_volume: dict[str, dict[str, str]] = {}
    for name, role in roles.items():
        if role not in ROLE_FOLDERS:
            continue
        w = f"{where}: service {name}"
        env = service_env(services[name])
        if role in ("studio-core", "data-worker"):
            check_storage_layout(p, w, env)
            layouts[name] = {var: env.get(var) for var in STORAGE_VARS}
            for var in STORAGE_VARS:
                if image_env.get(var):
                    p.check(env.get(var) == image_env[var], w, f"{var} differs from the image's {image_env[var]}")
        folders = storage_folders(env)
        for folder in ROLE_FOLDERS[role]:
            mount = volume_at(mounts[name], folders[folder])
            if p.check(
                mount is not None and mount["target"] == posixpath.normpath(folders[folder]),
                w,
                f"{folder} ({folders[folder]}) must be exactly the mount point of a named volume",
            ):
                p.check(not mount["read_only"], w, f"{folder} must be writable")
                folder_volume.setdefault(folder, {})[name] = mount["source"]
        # A working copy is a tmpfs of the service's own, never a volume.
        tmpfs = {posixpath.normpath(str(entry).split(":", 1)[0]) for entry in service_tmpfs(services[name])}
        for folder in ROLE_WORKING_COPIES.get(role, []):
            copy = posixpath.normpath(folders[folder])
            p.check(copy in tmpfs, w, f"{folder} ({copy}) is a working copy of the core database: it must be a tmpfs of the service, one per replica")
            p.check(volume_at(mounts[name], copy) is None, w, f"{folder} ({copy}) must not be on a volume: replicas would share it")
        # A role mounts no state folder it does not use.
        used = {posixpath.normpath(folders[f]) for f in ROLE_FOLDERS[role]}
        for mount in mounts[name]:
            if mount["source"] != "certs":
                p.check(mount["target"] in used, w, f"mounts {mount['source']} at {mount['target']}, which it does not use")
    p.check(len({json.dumps(v, sort_keys=True) for v in layouts.values()}) <= 1, where, f"storage layouts differ: {layouts}")
    # Every data-worker keeps its apps on a volume of its own.
    for folder, by_service in folder_volume.items():
        sharing: dict[str, list[str]] = {}
        for name, source in by_service.items():
            sharing.setdefault(source, []).append(name)
        for source, names in sharing.items():
            p.check(
                len(names) == 1,
                where,
                f"every data-worker needs its own volume of {folder}: {sorted(names)} share {source}",
            )
    owners: dict[str, str] = {}
    for folder, by_service in folder_volume.items():
        for source in set(by_service.values()):
            if source in owners:
                p.add(where, f"volume {source} holds both {owners[source]} and {folder}")
            owners[source] = folder
    p.check("APP_DATA_ROOT" in folder_volume, where, "no role mounts a volume for APP_DATA_ROOT")

    check_compose_postgres(p, where, raw, services, mounts, by_role)
    check_compose_placement(p, where, services, roles, aliases)

    # Replication: each role that owns SQLite databases has its replicator in the
    # `replication` profile, on the role's database volume at the same path,
    # with the role's default socket, the same credentials and a way out to
    # object storage; the role starts after it when it runs.
    claimed: set[str] = set()
    for name, role in sorted(roles.items()):
        folder_var = REPLICATED_ROLES.get(role)
        if folder_var is None:
            continue
        w = f"{where}: service {name}"
        env = service_env(services[name])
        for var in ["SASHA_REPLICA_URL", "SASHA_REPLICA_MODE"] + REPLICA_CREDENTIALS:
            p.check(var in env, w, f"must pass {var} (empty: replication off)")
        folder = posixpath.normpath(storage_folders(env)[folder_var])
        socket = posixpath.join(folder, REPLICA_SOCKET_NAME)
        role_mount = volume_at(mounts[name], folder)
        # Every worker's socket is at the same path, each on its own volume:
        # a worker's replicator is the one on its volume.
        sidecars = [
            other
            for other, service in services.items()
            if (service.get("command") or [])[:3] == ["litestream", "--socket", socket]
            and role_mount is not None
            and any(m["source"] == role_mount["source"] for m in mounts[other])
        ]
        if not p.check(
            len(sidecars) == 1,
            w,
            f"needs exactly one replicator running `litestream --socket {socket}` on its volume, has {sidecars}",
        ):
            continue
        claimed.add(sidecars[0])
        sidecar = services[sidecars[0]]
        s_where = f"{where}: service {sidecars[0]}"
        p.check(sidecar.get("image") == services[name].get("image"), s_where, "must run the role's image (sasha litestream)")
        p.check("replication" in (sidecar.get("profiles") or []), s_where, "must be in the replication profile")
        role_mount = volume_at(mounts[name], folder)
        sidecar_mounts = mounts[sidecars[0]]
        p.check(
            role_mount is not None
            and len(sidecar_mounts) == 1
            and sidecar_mounts[0]["source"] == role_mount["source"]
            and sidecar_mounts[0]["target"] == role_mount["target"]
            and not sidecar_mounts[0]["read_only"],
            s_where,
            f"must mount exactly {name}'s volume of {folder_var}, writable, at {folder}",
        )
        sidecar_env = service_env(sidecar)
        for var in REPLICA_CREDENTIALS:
            p.check(sidecar_env.get(var) == env.get(var), s_where, f"{var} must be the role's")
        networks = sidecar.get("networks") or {}
        p.check("egress" in networks, s_where, "must join egress to reach object storage")
        depends = (services[name].get("depends_on") or {}).get(sidecars[0]) if isinstance(services[name].get("depends_on"), dict) else None
        p.check(
            isinstance(depends, dict) and depends.get("required") is False,
            w,
            f"must depend on {sidecars[0]} with required: false (started first when the profile runs)",
        )
    for name, service in services.items():
        if (service.get("command") or [])[:2] == ["litestream", "--socket"]:
            p.check(name in claimed, f"{where}: service {name}", "replicates no data-worker's volume")

    # Roles: listeners, health, shutdown, TLS, dependencies.
    origins: dict[str, set[str]] = {}
    for name, role in roles.items():
        if role not in ROLE_FOLDERS:
            continue
        w = f"{where}: service {name}"
        service = services[name]
        env = service_env(service)
        for var in ROLE_LISTENERS[role] + ["SASHA_HEALTH_ADDR"]:
            p.check(env.get(var, "").startswith("0.0.0.0:"), w, f"{var} must listen on 0.0.0.0, is {env.get(var)!r}")
        health_port = addr_port(env.get("SASHA_HEALTH_ADDR", ""))
        test = " ".join(map(str, (service.get("healthcheck") or {}).get("test") or []))
        p.check(
            f"/dev/tcp/127.0.0.1/{health_port}" in test and "/readyz" in test,
            w,
            f"the healthcheck must ask GET /readyz on the health port {health_port}",
        )
        grace = int(env.get("SASHA_SHUTDOWN_GRACE_SECS") or 0)
        stop = re.fullmatch(r"(\d+)s", str(service.get("stop_grace_period", "")))
        p.check(
            grace > 0 and stop is not None and int(stop.group(1)) > grace,
            w,
            "stop_grace_period must be longer than SASHA_SHUTDOWN_GRACE_SECS",
        )
        depends = service.get("depends_on") or {}
        if role in GRPC_ROLES:
            for var, expected in (
                ("SASHA_TLS_CA", "/certs/ca.pem"),
                ("SASHA_TLS_CERT", f"/certs/{role}/cert.pem"),
                ("SASHA_TLS_KEY", f"/certs/{role}/key.pem"),
            ):
                p.check(env.get(var) == expected, w, f"{var} must be {expected} (sasha certs' layout)")
            certs_mount = volume_at(mounts[name], "/certs/ca.pem")
            p.check(
                certs_mount is not None and certs_mount["source"] == "certs" and certs_mount["read_only"],
                w,
                "must mount the certs volume read-only at /certs",
            )
            condition = (depends.get(certs_name or "") or {}).get("condition") if isinstance(depends, dict) else None
            p.check(
                condition == "service_completed_successfully",
                w,
                "must depend on the certs job with condition service_completed_successfully",
            )
        if isinstance(depends, dict):
            for other, rule in depends.items():
                if (rule or {}).get("condition") == "service_healthy":
                    p.check("healthcheck" in services.get(other, {}), w, f"waits for {other} to be healthy, which has no healthcheck")
        for var, (target_role, listen_var) in GRPC_URLS.items():
            if var not in env:
                continue
            match = re.fullmatch(r"https://([^:/]+):(\d+)", env[var])
            if not p.check(match is not None, w, f"{var} must be https://host:port, is {env[var]!r}"):
                continue
            target = aliases.get(match.group(1))
            p.check(
                target is not None and roles.get(target) == target_role,
                w,
                f"{var} names {match.group(1)}, which is not {target_role}",
            )
            if target is not None:
                listen = addr_port(service_env(services[target]).get(listen_var, ""))
                p.check(listen == int(match.group(2)), w, f"{var} uses port {match.group(2)}, {target} listens on {listen}")
            p.check(
                match.group(1) in (target_role, f"{target_role}.sasha.internal"),
                w,
                f"{var} should name {target_role}.sasha.internal, the certificate's name",
            )
        for var in ("SASHA_PUBLIC_ORIGIN", "SASHA_APP_SANDBOX_ORIGIN"):
            if var in env:
                origins.setdefault(var, set()).add(env[var])

    # Origins: one value each, https, two hostnames on two sites.
    for var in ("SASHA_PUBLIC_ORIGIN", "SASHA_APP_SANDBOX_ORIGIN"):
        p.check(len(origins.get(var, set())) == 1, where, f"{var} must have one value everywhere: {sorted(origins.get(var, set()))}")
    studio = next(iter(origins.get("SASHA_PUBLIC_ORIGIN", {""})))
    sandbox = next(iter(origins.get("SASHA_APP_SANDBOX_ORIGIN", {""})))
    studio_host, sandbox_host = origin_host(studio), origin_host(sandbox)
    for origin in (studio, sandbox):
        p.check(origin.startswith("https://"), where, f"{origin} must be https (Secure, __Host- cookies)")
    if studio_host and sandbox_host:
        p.check(
            site_of(studio_host) != site_of(sandbox_host),
            where,
            f"{studio_host} and {sandbox_host} must be on different registrable domains",
        )

    # The proxy: the template's variables, upstreams, hostnames, TLS.
    proxy = services.get("proxy", {})
    env = service_env(proxy)
    w = f"{where}: service proxy"
    p.check(env.get("NGINX_ENVSUBST_FILTER") == NGINX_ENVSUBST_FILTER, w, f"NGINX_ENVSUBST_FILTER must be {NGINX_ENVSUBST_FILTER}")
    set_vars = {k for k in env if re.match(NGINX_ENVSUBST_FILTER, k)}
    p.check(set_vars == NGINX_TEMPLATE_VARS, w, f"sets {sorted(set_vars)}, the agreed template variables are {sorted(NGINX_TEMPLATE_VARS)}")
    p.check(env.get("SASHA_STUDIO_HOST") == studio_host, w, f"SASHA_STUDIO_HOST must be {studio_host}")
    p.check(env.get("SASHA_SANDBOX_HOST") == sandbox_host, w, f"SASHA_SANDBOX_HOST must be {sandbox_host}")
    host, _, port = env.get("EDGE_SANDBOX_HTTP", "").partition(":")
    target = aliases.get(host)
    p.check(target is not None and roles.get(target) == "edge-sandbox", w, "EDGE_SANDBOX_HTTP must name the edge-sandbox service")
    if target:
        p.check(
            port.isdigit() and int(port) == addr_port(service_env(services[target]).get("SASHA_EDGE_ADDR", "")),
            w,
            "EDGE_SANDBOX_HTTP must use edge-sandbox's SASHA_EDGE_ADDR port",
        )
    for var, (role, listen_var) in NGINX_SERVER_VARS.items():
        servers = re.findall(r"server\s+([^\s;]+)\s*[^;]*;", env.get(var, ""))
        p.check(bool(servers), w, f"{var} must hold `server host:port;` lines")
        listen = addr_port(service_env(services.get(by_role.get(role, ""), {})).get(listen_var, ""))
        for server in servers:
            host, _, port = server.partition(":")
            p.check(
                host in aliases and roles.get(aliases[host]) == role and port.isdigit() and int(port) == listen,
                w,
                f"{var} names {server}, not the {role} service's {listen_var} port",
            )
    template_mount = [
        c for c in proxy.get("configs") or [] if isinstance(c, dict) and c.get("target", "").startswith("/etc/nginx/templates/")
    ]
    if p.check(len(template_mount) == 1, w, "must mount the nginx template into /etc/nginx/templates/"):
        config = (doc.get("configs") or {}).get(template_mount[0]["source"], {})
        file = (path.parent / config.get("file", "")).resolve()
        p.check(file == (root / "deploy/nginx/sasha.conf.template").resolve(), w, "the template must be deploy/nginx/sasha.conf.template")
        if p.check(file.is_file(), w, f"the template {file} does not exist"):
            used = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", file.read_text()))
            used = {v for v in used if re.match(NGINX_ENVSUBST_FILTER, v)}
            p.check(used <= set_vars, w, f"the template uses {sorted(used - set_vars)}, which the proxy does not set")
            p.check(set_vars <= used, w, f"the proxy sets {sorted(set_vars - used)}, which the template does not use")
    for var in ("SASHA_TLS_CERT_FILE", "SASHA_TLS_KEY_FILE"):
        targets = [s.get("target") for s in proxy.get("secrets") or [] if isinstance(s, dict)]
        p.check(env.get(var) in targets, w, f"{var} ({env.get(var)}) must be a mounted secret")
    for name, secret in (doc.get("secrets") or {}).items():
        file = (path.parent / str(secret.get("file", ""))).resolve()
        p.check(
            "file" in secret
            and file.is_relative_to((root / "deploy").resolve())
            and git_ignores_everything(file.parent),
            where,
            f"secret {name} must be a file in a folder of deploy/ whose .gitignore ignores everything (deploy/tls/, deploy/secrets/)",
        )


def check_compose_placement(
    p: Problems,
    where: str,
    services: dict,
    roles: dict[str, str],
    aliases: dict[str, str],
) -> None:
    """Several data-workers: the leases layout in every role that takes part,
    no single worker's URL, each worker named once and advertising its own
    address, and the boot order studio-core, workers, gateway."""
    names = {role: sorted(n for n, r in roles.items() if r == role) for role in PLACEMENT_ROLES}
    for role in PLACEMENT_ROLES:
        for name in names[role]:
            env = service_env(services[name])
            w = f"{where}: service {name}"
            p.check(
                env.get(PLACEMENT) == PLACEMENT_LEASES,
                w,
                f"{PLACEMENT} must be {PLACEMENT_LEASES} (several data-workers), is {env.get(PLACEMENT)!r}",
            )
            p.check(
                SINGLE_WORKER_URL not in env,
                w,
                f"must not pass {SINGLE_WORKER_URL}: with leases each app's worker is asked of studio-core",
            )
    ids: dict[str, str] = {}
    for name in names["data-worker"]:
        env = service_env(services[name])
        w = f"{where}: service {name}"
        worker_id = env.get(WORKER_ID, "")
        if p.check(bool(worker_id), w, f"must be named by {WORKER_ID}"):
            p.check(worker_id not in ids, w, f"{WORKER_ID} {worker_id} is also {ids.get(worker_id)}'s")
            ids[worker_id] = name
        p.check(
            "SASHA_CORE_GRPC_URL" in env,
            w,
            "must reach studio-core (SASHA_CORE_GRPC_URL) to renew its lease",
        )
        match = re.fullmatch(r"https://([^:/]+):(\d+)", env.get(ADVERTISE_URL, ""))
        listen = addr_port(env.get("SASHA_DATA_GRPC_ADDR", ""))
        p.check(
            match is not None and aliases.get(match.group(1)) == name and int(match.group(2)) == listen,
            w,
            f"{ADVERTISE_URL} must be https://<this service>:{listen}, is {env.get(ADVERTISE_URL)!r}",
        )

    def condition(name: str, other: str) -> str | None:
        depends = services[name].get("depends_on") or {}
        return ((depends.get(other) or {}).get("condition")) if isinstance(depends, dict) else None

    for core in names["studio-core"]:
        for worker in names["data-worker"]:
            p.check(
                condition(core, worker) is None,
                f"{where}: service {core}",
                f"must not wait for {worker}: studio-core starts first (the workers renew their leases with it)",
            )
    for worker in names["data-worker"]:
        for core in names["studio-core"]:
            p.check(
                condition(worker, core) == "service_healthy",
                f"{where}: service {worker}",
                f"must depend on {core} with condition service_healthy",
            )
    for gateway in names["mcp-gateway"]:
        for other in names["studio-core"] + names["data-worker"]:
            p.check(
                condition(gateway, other) == "service_healthy",
                f"{where}: service {gateway}",
                f"must depend on {other} with condition service_healthy",
            )


def check_compose_postgres(
    p: Problems,
    where: str,
    raw: dict,
    services: dict,
    mounts: dict[str, list[dict]],
    by_role: dict[str, str],
) -> None:
    """The core database: a PostgreSQL service with its own volume, a
    healthcheck and its password from a secret file; studio-core (and every
    other process that opens the core database) reading its URL from a
    secret file, waiting for it, in several replicas."""
    postgres = services.get(POSTGRES_SERVICE)
    if postgres is None:
        return
    w = f"{where}: service {POSTGRES_SERVICE}"
    image = str(((raw.get("services") or {}).get(POSTGRES_SERVICE) or {}).get("image", ""))
    p.check(
        re.fullmatch(r"\$\{[A-Z][A-Z0-9_]*:-" + re.escape(POSTGRES_DEFAULT_IMAGE) + r"\}", image) is not None,
        w,
        f"image must be a variable defaulting to {POSTGRES_DEFAULT_IMAGE}, like the other images, is {image!r}",
    )
    test = " ".join(map(str, (postgres.get("healthcheck") or {}).get("test") or []))
    p.check(
        "pg_isready" in test and re.search(r"(--host=|-h\s*)127\.0\.0\.1", test) is not None,
        w,
        "the healthcheck must ask pg_isready over TCP (--host=127.0.0.1): while a new volume is initialized "
        "the server listens on its socket only",
    )
    data = volume_at(mounts.get(POSTGRES_SERVICE, []), POSTGRES_DATA)
    if p.check(
        data is not None and data["target"] == POSTGRES_DATA and not data["read_only"],
        w,
        f"must keep its data on a named volume mounted at {POSTGRES_DATA}",
    ):
        others = [n for n, ms in mounts.items() if n != POSTGRES_SERVICE and any(m["source"] == data["source"] for m in ms)]
        p.check(not others, w, f"its volume {data['source']} is its own, also mounted by {others}")
    env = service_env(postgres)
    secrets = service_secrets(postgres)
    p.check("POSTGRES_PASSWORD" not in env, w, "POSTGRES_PASSWORD must not be set: use POSTGRES_PASSWORD_FILE")
    p.check(
        env.get("POSTGRES_PASSWORD_FILE") in secrets,
        w,
        f"POSTGRES_PASSWORD_FILE ({env.get('POSTGRES_PASSWORD_FILE')}) must be a mounted secret, mounts {sorted(secrets)}",
    )
    for var in ("POSTGRES_USER", "POSTGRES_DB"):
        p.check(bool(env.get(var)), w, f"{var} must name the database's owner and database")
    p.check(not postgres.get("ports"), w, "must publish no port")
    internal = {n for n, net in (raw.get("networks") or {}).items() if (net or {}).get("internal") is True}
    networks = set(postgres.get("networks") or {})
    p.check(bool(networks) and networks <= internal, w, f"must join only internal networks {sorted(internal)}, joins {sorted(networks)}")

    # Every service that opens the core database reads the same secret file,
    # studio-core's, which is not postgres's password.
    core = by_role.get("studio-core")
    password_secret = secrets.get(env.get("POSTGRES_PASSWORD_FILE", ""))

    def url_secret(service: dict) -> str | None:
        return service_secrets(service).get(service_env(service).get(CORE_DATABASE_FILE, ""))

    core_url_secret = url_secret(services.get(core or "", {}))
    p.check(
        core_url_secret is not None and core_url_secret != password_secret,
        f"{where}: service {core}",
        f"{CORE_DATABASE_FILE} must be a secret of its own, mounted (postgres's password is {password_secret})",
    )
    for name, service in services.items():
        env = service_env(service)
        if name != core and CORE_DATABASE_FILE not in env and CORE_DATABASE_URL not in env:
            continue
        w = f"{where}: service {name}"
        p.check(CORE_DATABASE_URL not in env, w, f"{CORE_DATABASE_URL} must not be set: read it from a secret ({CORE_DATABASE_FILE})")
        p.check(
            url_secret(service) is not None and url_secret(service) == core_url_secret,
            w,
            f"{CORE_DATABASE_FILE} ({env.get(CORE_DATABASE_FILE)}) must be studio-core's mounted secret {core_url_secret}",
        )
        p.check(
            "SASHA_REPLICA_URL" not in env,
            w,
            "must not pass SASHA_REPLICA_URL: it is data-worker's, and studio-core refuses it beside a PostgreSQL core database",
        )
    studio = services.get(core or "", {})
    w = f"{where}: service {core}"
    depends = studio.get("depends_on") or {}
    condition = (depends.get(POSTGRES_SERVICE) or {}).get("condition") if isinstance(depends, dict) else None
    p.check(condition == "service_healthy", w, f"must depend on {POSTGRES_SERVICE} with condition service_healthy")
    replicas = ((studio.get("deploy") or {}).get("replicas"))
    p.check(
        str(replicas).isdigit() and int(replicas) >= CORE_MIN_REPLICAS,
        w,
        f"must run at least {CORE_MIN_REPLICAS} replicas (deploy.replicas), runs {replicas}",
    )


# ---------------------------------------------------------------------------
# Kubernetes


def load_manifests(root: Path, p: Problems) -> list[tuple[str, dict]]:
    documents = []
    for file in sorted((root / "deploy" / "k8s").rglob("*.yaml")):
        relative = file.relative_to(root).as_posix()
        try:
            for document in yaml.safe_load_all(file.read_text()):
                if document is not None:
                    documents.append((relative, document))
        except yaml.YAMLError as error:
            p.add(relative, f"is not YAML: {error}")
    return documents


def pod_spec(obj: dict) -> dict | None:
    if obj.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return None


def pod_labels(obj: dict) -> dict:
    return (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}


def container_role(container: dict) -> str | None:
    args = container.get("args") or []
    return args[1] if args[:1] == ["serve"] and len(args) == 2 else None


def check_kubernetes(root: Path, p: Problems, image_env: dict[str, str]) -> None:
    documents = load_manifests(root, p)
    p.check(bool(documents), "deploy/k8s", "no manifests found")
    for version in KUBERNETES_VERSIONS:
        for file, document in documents:
            name = f"{document.get('kind')}/{(document.get('metadata') or {}).get('name')}"
            try:
                kubernetes_validate.validate(document, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                path = ".".join(str(x) for x in error.path)
                p.add(f"{file} {name} (Kubernetes {version})", f"{path}: {error.message}")
            except Exception as error:  # unknown kind or version: also a failure
                p.add(f"{file} {name} (Kubernetes {version})", getattr(error, "message", str(error)))

    applied = [(f, d) for f, d in documents if "/secrets/" not in f]
    examples = [d for f, d in documents if "/secrets/" in f]
    objects = {(d.get("kind"), (d.get("metadata") or {}).get("name")): d for _, d in applied}
    # The telemetry objects (the collector) are not Sasha roles: they are
    # checked for hardening and wiring here and left out of the role rules.
    telemetry = {
        key: obj
        for key, obj in objects.items()
        if ((obj.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component") == "telemetry"
    }
    objects = {key: obj for key, obj in objects.items() if key not in telemetry}
    collector = telemetry.get(("Deployment", "otel-collector")) or {}
    collector_spec = pod_spec(collector) if collector else None
    if p.check(collector_spec is not None, "deploy/k8s", "there is no Deployment otel-collector"):
        w = "Deployment/otel-collector"
        pod_security = collector_spec.get("securityContext") or {}
        p.check(pod_security.get("runAsNonRoot") is True, w, "pod securityContext.runAsNonRoot must be true")
        p.check(collector_spec.get("automountServiceAccountToken") is False, w, "must not mount a service account token")
        for container in collector_spec.get("containers") or []:
            security = container.get("securityContext") or {}
            p.check(security.get("readOnlyRootFilesystem") is True, w, "readOnlyRootFilesystem must be true")
            p.check(security.get("allowPrivilegeEscalation") is False, w, "allowPrivilegeEscalation must be false")
            p.check("ALL" in ((security.get("capabilities") or {}).get("drop") or []), w, "capabilities must drop ALL")

    def get(kind: str, name: str) -> dict:
        return objects.get((kind, name)) or {}

    for file, document in documents:
        if document.get("kind") != "Namespace":
            p.check((document.get("metadata") or {}).get("namespace") == "sasha", file, f"{document.get('kind')} must be in namespace sasha")

    config = get("ConfigMap", "sasha-config").get("data") or {}
    if not p.check(bool(config), "deploy/k8s", "there is no ConfigMap sasha-config"):
        return
    check_storage_layout(p, "ConfigMap sasha-config", config)
    for var in STORAGE_VARS:
        if image_env.get(var):
            p.check(config.get(var) == image_env[var], "ConfigMap sasha-config", f"{var} differs from the image's {image_env[var]}")
    grace = int(config.get("SASHA_SHUTDOWN_GRACE_SECS") or 0)
    p.check(grace > 0, "ConfigMap sasha-config", "SASHA_SHUTDOWN_GRACE_SECS must be set")
    health_port = addr_port(config.get("SASHA_HEALTH_ADDR", ""))
    p.check(config.get("SASHA_HEALTH_ADDR", "").startswith("0.0.0.0:"), "ConfigMap sasha-config", "SASHA_HEALTH_ADDR must listen on 0.0.0.0")
    studio_host = origin_host(config.get("SASHA_PUBLIC_ORIGIN", ""))
    sandbox_host = origin_host(config.get("SASHA_APP_SANDBOX_ORIGIN", ""))
    for var in ("SASHA_PUBLIC_ORIGIN", "SASHA_APP_SANDBOX_ORIGIN"):
        p.check(config.get(var, "").startswith("https://"), "ConfigMap sasha-config", f"{var} must be https")
    if studio_host and sandbox_host:
        p.check(site_of(studio_host) != site_of(sandbox_host), "ConfigMap sasha-config", "the two origins must be on different registrable domains")
    folders = storage_folders(config)
    endpoint = re.fullmatch(r"http://([^:/]+):(\d+)", config.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
    if p.check(endpoint is not None, "ConfigMap sasha-config", "OTEL_EXPORTER_OTLP_ENDPOINT must be http://service:port"):
        service = telemetry.get(("Service", endpoint.group(1))) or {}
        ports = [port.get("port") for port in (service.get("spec") or {}).get("ports") or []]
        p.check(int(endpoint.group(2)) in ports, "ConfigMap sasha-config", "OTEL_EXPORTER_OTLP_ENDPOINT must name the collector's Service and port")

    workloads = {}
    for (kind, name), obj in objects.items():
        spec = pod_spec(obj)
        if spec is None:
            continue
        w = f"{kind}/{name}"
        containers = spec.get("containers") or []
        roles = {container_role(c) for c in containers}
        p.check(len(containers) == 1 and None not in roles, w, "must run one container: sasha serve <role>")
        role = next(iter(roles)) if len(roles) == 1 else None
        workloads[role] = obj
        # Security.
        pod_security = spec.get("securityContext") or {}
        p.check(pod_security.get("runAsNonRoot") is True, w, "pod securityContext.runAsNonRoot must be true")
        p.check((pod_security.get("seccompProfile") or {}).get("type") == "RuntimeDefault", w, "pod seccompProfile must be RuntimeDefault")
        p.check(spec.get("automountServiceAccountToken") is False, w, "must not mount a service account token")
        period = spec.get("terminationGracePeriodSeconds")
        p.check(isinstance(period, int) and period > grace, w, f"terminationGracePeriodSeconds must be above SASHA_SHUTDOWN_GRACE_SECS ({grace})")
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        claim_templates = {
            (t.get("metadata") or {}).get("name") for t in (obj.get("spec") or {}).get("volumeClaimTemplates") or []
        }
        for container in containers:
            c = f"{w} container {container.get('name')}"
            security = container.get("securityContext") or {}
            p.check(security.get("readOnlyRootFilesystem") is True, c, "readOnlyRootFilesystem must be true")
            p.check(security.get("allowPrivilegeEscalation") is False, c, "allowPrivilegeEscalation must be false")
            p.check(security.get("runAsNonRoot") is True, c, "runAsNonRoot must be true")
            p.check("ALL" in ((security.get("capabilities") or {}).get("drop") or []), c, "capabilities must drop ALL")
            p.check((security.get("seccompProfile") or {}).get("type") == "RuntimeDefault", c, "seccompProfile must be RuntimeDefault")
            p.check(
                any((e.get("configMapRef") or {}).get("name") == "sasha-config" for e in container.get("envFrom") or []),
                c,
                "must take its environment from sasha-config",
            )
            env = dict(config)
            env.update({e["name"]: e.get("value", "") for e in container.get("env") or []})
            ports = {port.get("name"): port.get("containerPort") for port in container.get("ports") or []}
            for var in ROLE_LISTENERS.get(role, []):
                p.check(env.get(var, "").startswith("0.0.0.0:"), c, f"{var} must listen on 0.0.0.0")
                p.check(addr_port(env.get(var, "")) in ports.values(), c, f"{var}'s port must be a container port")
            p.check(ports.get("health") == health_port, c, f"the health port must be SASHA_HEALTH_ADDR's ({health_port})")
            for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz"), ("startupProbe", "/livez")):
                get_ = ((container.get(probe) or {}).get("httpGet")) or {}
                p.check(
                    get_.get("path") == path and get_.get("port") in ("health", health_port),
                    c,
                    f"{probe} must be GET {path} on the health port",
                )
            p.check(
                "cpu" in ((container.get("resources") or {}).get("requests") or {}),
                c,
                "must request CPU (the autoscaler and the scheduler need it)",
            )
            # State folders: exactly the ones the role uses, each its own volume.
            mounts = {posixpath.normpath(m["mountPath"]): m for m in container.get("volumeMounts") or []}
            for path, mount in mounts.items():
                p.check(mount["name"] in volumes or mount["name"] in claim_templates, c, f"mounts {mount['name']} at {path}, which is not a volume of the pod")
            state_sources = {}
            for folder in ROLE_FOLDERS.get(role, []):
                mount = mounts.get(posixpath.normpath(folders[folder]))
                if not p.check(mount is not None, c, f"must mount a volume at {folder} ({folders[folder]})"):
                    continue
                source = volumes.get(mount["name"], {})
                claim = (source.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    p.check(("PersistentVolumeClaim", claim) in objects, c, f"claims {claim}, which is not defined")
                    state_sources[folder] = f"pvc/{claim}"
                elif mount["name"] in claim_templates:
                    state_sources[folder] = f"template/{mount['name']}"
                else:
                    p.add(c, f"{folder} must be on a persistent volume")
            p.check(
                len(set(state_sources.values())) == len(state_sources),
                c,
                f"state folders share a volume: {state_sources}",
            )
            # A working copy is an emptyDir of the pod's own.
            for folder in ROLE_WORKING_COPIES.get(role, []):
                mount = mounts.get(posixpath.normpath(folders[folder]))
                if p.check(mount is not None, c, f"must mount an emptyDir at {folder} ({folders[folder]})"):
                    p.check(
                        "emptyDir" in volumes.get(mount["name"], {}),
                        c,
                        f"{folder} is a working copy of the core database: it must be an emptyDir, one per pod, never a persistent volume",
                    )
            targets = list(mounts)
            for i, a in enumerate(targets):
                for b in targets[i + 1 :]:
                    p.check(not nested(a, b), c, f"mounts at {a} and {b} nest")
            for path, mount in mounts.items():
                source = volumes.get(mount["name"], {})
                if "persistentVolumeClaim" in source or mount["name"] in claim_templates:
                    p.check(
                        path in {posixpath.normpath(folders[f]) for f in ROLE_FOLDERS.get(role, [])},
                        c,
                        f"mounts a persistent volume at {path}, which it does not use",
                    )
            # TLS: the CA and this role's own certificate at the configured paths.
            if role in GRPC_ROLES:
                tls_dir = posixpath.dirname(config.get("SASHA_TLS_CERT", ""))
                mount = mounts.get(tls_dir)
                if p.check(mount is not None and mount.get("readOnly") is True, c, f"must mount its certificates read-only at {tls_dir}"):
                    sources = ((volumes.get(mount["name"]) or {}).get("projected") or {}).get("sources") or []
                    files = {}
                    for source in sources:
                        secret = source.get("secret") or {}
                        for item in secret.get("items") or []:
                            files[item["path"]] = secret.get("name")
                    for var in ("SASHA_TLS_CA", "SASHA_TLS_CERT", "SASHA_TLS_KEY"):
                        p.check(posixpath.basename(config.get(var, "")) in files, c, f"{var} is not a file of its TLS volume")
                    key_secret = files.get(posixpath.basename(config.get("SASHA_TLS_KEY", "")))
                    p.check(key_secret == f"sasha-mtls-{role}", c, f"its key must come from sasha-mtls-{role}, not {key_secret}")
                    example_names = {(d.get("metadata") or {}).get("name") for d in examples}
                    for secret in set(files.values()):
                        p.check(secret in example_names, c, f"Secret {secret} is not described in deploy/k8s/secrets/")

    for role in ROLE_FOLDERS:
        p.check(role in workloads, "deploy/k8s", f"no workload runs {role}")

    # Replication: a native sidecar (an init container with restartPolicy
    # Always) beside each role that owns databases, running the role's image
    # as `sasha litestream` on the role's database volume at the same path
    # with the role's default socket; both take the credentials from the
    # optional Secret sasha-replica; only the workloads that own databases
    # run one.
    p.check("SASHA_REPLICA_URL" in config, "ConfigMap sasha-config", "must carry SASHA_REPLICA_URL (empty: off)")
    p.check(config.get("SASHA_REPLICA_MODE") in ("sync", "async"), "ConfigMap sasha-config", "SASHA_REPLICA_MODE must be sync or async")
    for role, obj in workloads.items():
        spec = pod_spec(obj) or {}
        w = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
        init = spec.get("initContainers") or []
        if role not in REPLICATED_ROLES:
            p.check(not init, w, "only the roles that own databases run a replicator")
            continue
        container = (spec.get("containers") or [{}])[0]
        folder = posixpath.normpath(folders[REPLICATED_ROLES[role]])
        socket = posixpath.join(folder, REPLICA_SOCKET_NAME)
        sidecars = [c for c in init if (c.get("args") or [])[:3] == ["litestream", "--socket", socket]]
        if not p.check(len(sidecars) == 1, w, f"needs one init container running `litestream --socket {socket}`"):
            continue
        sidecar = sidecars[0]
        c = f"{w} init container {sidecar.get('name')}"
        p.check(sidecar.get("restartPolicy") == "Always", c, "must be a native sidecar (restartPolicy: Always)")
        p.check(sidecar.get("image") == container.get("image"), c, "must run the role's image")
        security = sidecar.get("securityContext") or {}
        p.check(security.get("readOnlyRootFilesystem") is True, c, "readOnlyRootFilesystem must be true")
        p.check(security.get("allowPrivilegeEscalation") is False, c, "allowPrivilegeEscalation must be false")
        p.check(security.get("runAsNonRoot") is True, c, "runAsNonRoot must be true")
        p.check("ALL" in ((security.get("capabilities") or {}).get("drop") or []), c, "capabilities must drop ALL")
        p.check((security.get("seccompProfile") or {}).get("type") == "RuntimeDefault", c, "seccompProfile must be RuntimeDefault")
        p.check("cpu" in ((sidecar.get("resources") or {}).get("requests") or {}), c, "must request CPU")
        role_mounts = {posixpath.normpath(m["mountPath"]): m["name"] for m in container.get("volumeMounts") or []}
        sidecar_mounts = {posixpath.normpath(m["mountPath"]): m for m in sidecar.get("volumeMounts") or []}
        mount = sidecar_mounts.get(folder)
        p.check(
            mount is not None and mount["name"] == role_mounts.get(folder) and not mount.get("readOnly"),
            c,
            f"must mount the role's volume of {folder} there, writable",
        )
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        claim_templates = {
            (t.get("metadata") or {}).get("name") for t in (obj.get("spec") or {}).get("volumeClaimTemplates") or []
        }
        for path, other in sidecar_mounts.items():
            source = volumes.get(other["name"], {})
            if "persistentVolumeClaim" in source or other["name"] in claim_templates:
                p.check(path == folder, c, f"mounts a persistent volume at {path}, which it does not replicate")
        for who, which in ((w, container), (c, sidecar)):
            p.check(
                any(
                    (e.get("secretRef") or {}).get("name") == "sasha-replica" and (e.get("secretRef") or {}).get("optional") is True
                    for e in which.get("envFrom") or []
                ),
                who,
                "must take the optional Secret sasha-replica (the object storage credentials)",
            )
    example_names = {(d.get("metadata") or {}).get("name") for d in examples}
    p.check("sasha-replica" in example_names, "deploy/k8s/secrets", "must describe the Secret sasha-replica")
    core = workloads.get("studio-core", {})
    p.check(
        core.get("kind") == "Deployment" and ((core.get("spec") or {}).get("replicas") or 0) >= CORE_MIN_REPLICAS,
        "studio-core",
        f"must be a Deployment of at least {CORE_MIN_REPLICAS} replicas",
    )
    p.check(
        ((core.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate",
        "studio-core",
        "must update with Recreate (a newer build migrates the core database, which an older one then refuses)",
    )
    check_kubernetes_core_database(p, config, core, examples)
    data = workloads.get("data-worker", {})
    p.check(
        data.get("kind") == "StatefulSet" and ((data.get("spec") or {}).get("replicas") or 0) >= DATA_WORKERS_MIN,
        "data-worker",
        f"must be a StatefulSet of at least {DATA_WORKERS_MIN} replicas",
    )
    check_kubernetes_placement(p, config, workloads, objects)
    edge = workloads.get("edge-sandbox", {})
    p.check(((edge.get("spec") or {}).get("replicas") or 0) >= 2, "edge-sandbox", "must run at least 2 replicas")
    gateway = workloads.get("mcp-gateway", {})
    gateway_name = (gateway.get("metadata") or {}).get("name")
    p.check("replicas" not in (gateway.get("spec") or {}), "mcp-gateway", "the autoscaler owns replicas: leave the field out")
    hpas = [o for (k, _), o in objects.items() if k == "HorizontalPodAutoscaler"]
    hpa = next((h for h in hpas if ((h.get("spec") or {}).get("scaleTargetRef") or {}).get("name") == gateway_name), None)
    if p.check(hpa is not None, "mcp-gateway", "needs a HorizontalPodAutoscaler"):
        spec = hpa["spec"]
        p.check(hpa.get("apiVersion") == "autoscaling/v2", "HorizontalPodAutoscaler", "must be autoscaling/v2")
        p.check((spec.get("minReplicas") or 1) >= 2, "HorizontalPodAutoscaler", "minReplicas must be at least 2")
        cpu = [m for m in spec.get("metrics") or [] if (m.get("resource") or {}).get("name") == "cpu"]
        p.check(
            len(cpu) == 1 and cpu[0]["resource"]["target"].get("averageUtilization") == 70,
            "HorizontalPodAutoscaler",
            "must target 70 % CPU",
        )
    # Replicated workloads: how many replicas each runs at least (the
    # autoscaler's minimum where one owns the count).
    replicas = {}
    for role, obj in workloads.items():
        name = (obj.get("metadata") or {}).get("name")
        hpa = next((h for h in hpas if ((h.get("spec") or {}).get("scaleTargetRef") or {}).get("name") == name), None)
        replicas[role] = ((hpa or {}).get("spec") or {}).get("minReplicas") or (obj.get("spec") or {}).get("replicas") or 1
    pdb_targets = {}
    for (kind, name), obj in objects.items():
        if kind == "PodDisruptionBudget":
            selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            for role, workload in workloads.items():
                if selector and selector.items() <= pod_labels(workload).items():
                    pdb_targets[role] = obj
    for role, count in replicas.items():
        if count < 2:
            p.check(role not in pdb_targets, role, "a budget on a single replica would block node drains forever")
            continue
        # A node going away takes one replica, not all: the replicas spread
        # over nodes, and a drain evicts them one at a time.
        budget = (pdb_targets.get(role) or {}).get("spec") or {}
        if p.check(role in pdb_targets, role, "runs several replicas: needs a PodDisruptionBudget"):
            minimum = budget.get("minAvailable")
            p.check(
                isinstance(minimum, int) and 1 <= minimum < count,
                f"PodDisruptionBudget for {role}",
                f"minAvailable must be at least 1 and below its {count} replicas (or drains block), is {minimum}",
            )
        spec = pod_spec(workloads[role]) or {}
        labels = pod_labels(workloads[role])
        selectors = [
            (c.get("labelSelector") or {}).get("matchLabels") or {}
            for c in spec.get("topologySpreadConstraints") or []
            if c.get("topologyKey") == "kubernetes.io/hostname"
        ]
        p.check(
            any(selector and selector.items() <= labels.items() for selector in selectors),
            role,
            "runs several replicas: must spread them over nodes (topologySpreadConstraints on kubernetes.io/hostname)",
        )
        # Its persistent volumes are mounted on every node it runs on.
        for volume in spec.get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                modes = ((get("PersistentVolumeClaim", claim).get("spec") or {}).get("accessModes")) or []
                p.check(
                    "ReadWriteMany" in modes,
                    role,
                    f"runs several replicas on different nodes: PersistentVolumeClaim {claim} must be ReadWriteMany, is {modes}",
                )

    # Services select workloads and name their ports.
    services = {}
    for (kind, name), obj in objects.items():
        if kind != "Service":
            continue
        selector = (obj.get("spec") or {}).get("selector") or {}
        matched = [r for r, w in workloads.items() if selector and selector.items() <= pod_labels(w).items()]
        if not p.check(len(matched) == 1, f"Service/{name}", f"must select exactly one workload, selects {matched}"):
            continue
        role = matched[0]
        services[name] = (role, obj)
        container = (pod_spec(workloads[role]).get("containers") or [{}])[0]
        named = {port.get("name"): port.get("containerPort") for port in container.get("ports") or []}
        for port in (obj.get("spec") or {}).get("ports") or []:
            target = port.get("targetPort")
            p.check(target in named or target in named.values(), f"Service/{name}", f"targetPort {target} is not a port of {role}")
    data_service = next((n for n, (r, _) in services.items() if r == "data-worker"), None)
    p.check(
        data_service is not None and (data.get("spec") or {}).get("serviceName") == data_service,
        "data-worker",
        "the StatefulSet's serviceName must be its Service",
    )
    for var, (target_role, listen_var) in GRPC_URLS.items():
        match = re.fullmatch(r"https://([^:/]+):(\d+)", config.get(var, ""))
        if not p.check(match is not None, "ConfigMap sasha-config", f"{var} must be https://service:port"):
            continue
        role, service = services.get(match.group(1), (None, {}))
        p.check(role == target_role, "ConfigMap sasha-config", f"{var} names {match.group(1)}, not a Service of {target_role}")
        ports = [port.get("port") for port in (service.get("spec") or {}).get("ports") or []]
        p.check(int(match.group(2)) in ports, "ConfigMap sasha-config", f"{var}'s port is not a port of {match.group(1)}")

    # Network policies: deny by default; each gRPC server admits only the
    # roles allowed to call it (as mTLS does).
    policies = [o for (k, _), o in objects.items() if k == "NetworkPolicy"]
    p.check(
        any(
            (o.get("spec") or {}).get("podSelector") == {}
            and "Ingress" in ((o.get("spec") or {}).get("policyTypes") or [])
            and not (o.get("spec") or {}).get("ingress")
            for o in policies
        ),
        "NetworkPolicy",
        "there must be a default deny of ingress in the namespace",
    )
    # A data-worker calls studio-core too: it renews its lease there.
    allowed_callers = {"studio-core": {"mcp-gateway", "data-worker"}, "data-worker": {"studio-core", "mcp-gateway"}}
    for role, callers in allowed_callers.items():
        labels = pod_labels(workloads.get(role, {}))
        admitted = set()
        for policy in policies:
            selector = ((policy.get("spec") or {}).get("podSelector") or {}).get("matchLabels") or {}
            if not selector or not selector.items() <= labels.items():
                continue
            for rule in (policy.get("spec") or {}).get("ingress") or []:
                for source in rule.get("from") or []:
                    pods = source.get("podSelector") or {}
                    names = set((pods.get("matchLabels") or {}).get("app.kubernetes.io/name", "").split()) - {""}
                    for expression in pods.get("matchExpressions") or []:
                        if expression.get("key") == "app.kubernetes.io/name" and expression.get("operator") == "In":
                            names |= set(expression.get("values") or [])
                    admitted |= names
        p.check(admitted == callers, f"NetworkPolicy for {role}", f"admits {sorted(admitted)}, its callers are {sorted(callers)}")

    # Ingress: the studio host splits /mcp and the MCP resource's OAuth
    # metadata (RFC 9728) from the rest; the sandbox host reaches edge-sandbox
    # only.
    routes: dict[tuple[str, str], tuple[str, dict]] = {}
    for (kind, name), obj in objects.items():
        if kind != "Ingress":
            continue
        w = f"Ingress/{name}"
        spec = obj.get("spec") or {}
        p.check(spec.get("ingressClassName") == "nginx", w, "ingressClassName must be nginx")
        tls_hosts = {h for t in spec.get("tls") or [] for h in t.get("hosts") or []}
        for rule in spec.get("rules") or []:
            host = rule.get("host")
            p.check(host in tls_hosts, w, f"{host} must be served over TLS")
            for path in (rule.get("http") or {}).get("paths") or []:
                backend = ((path.get("backend") or {}).get("service")) or {}
                role, service = services.get(backend.get("name"), (None, {}))
                port = backend.get("port") or {}
                names = {(x.get("name"), x.get("port")) for x in (service.get("spec") or {}).get("ports") or []}
                p.check(
                    any(port.get("name") == n or port.get("number") == num for n, num in names),
                    w,
                    f"{backend} is not a port of a Service",
                )
                p.check(path.get("pathType") == "Prefix", w, f"{path.get('path')} must be a Prefix path")
                routes[(host, path.get("path"))] = (role, obj)
    expected = {
        (studio_host, "/mcp"): "mcp-gateway",
        (studio_host, OAUTH_RESOURCE_METADATA): "mcp-gateway",
        (studio_host, "/"): "studio-core",
        (sandbox_host, "/"): "edge-sandbox",
    }
    p.check(
        {key: role for key, (role, _) in routes.items()} == expected,
        "Ingress",
        f"routes must be exactly {expected}, are { {k: r for k, (r, _) in routes.items()} }",
    )
    mcp = (routes.get((studio_host, "/mcp")) or (None, {}))[1]
    annotations = (mcp.get("metadata") or {}).get("annotations") or {}
    for key, value in (
        ("proxy-buffering", "off"),
        ("proxy-request-buffering", "off"),
        ("proxy-body-size", "37m"),
    ):
        actual = annotations.get(f"nginx.ingress.kubernetes.io/{key}")
        p.check(actual == value, "Ingress for /mcp", f"{key} must be {value}, is {actual}")
    p.check(
        annotations.get("nginx.ingress.kubernetes.io/upstream-hash-by", "").startswith("$http_authorization")
        and "$http_mcp_session_id" not in annotations.get("nginx.ingress.kubernetes.io/upstream-hash-by", ""),
        "Ingress for /mcp",
        "must hash on the client's credential (Authorization), never on Mcp-Session-Id, which the initialize lacks",
    )
    p.check(
        int(annotations.get("nginx.ingress.kubernetes.io/proxy-read-timeout", "60")) >= 600,
        "Ingress for /mcp",
        "proxy-read-timeout must allow long streams",
    )
    for key, (role, obj) in routes.items():
        if key != (studio_host, "/mcp"):
            size = ((obj.get("metadata") or {}).get("annotations") or {}).get("nginx.ingress.kubernetes.io/proxy-body-size", "1m")
            p.check(size in ("1k", "1m"), f"Ingress for {key}", f"body size must stay small, is {size}")
    # ingress-nginx makes one upstream per Service port and takes its hashing
    # from the first Ingress naming it: every Ingress of the gateway must hash
    # alike, or /mcp could lose its stickiness.
    hash_keys = {
        ((obj.get("metadata") or {}).get("annotations") or {}).get("nginx.ingress.kubernetes.io/upstream-hash-by")
        for role, obj in routes.values()
        if role == "mcp-gateway"
    }
    p.check(len(hash_keys) == 1, "Ingress for mcp-gateway", f"every Ingress of the gateway must hash alike, they use {hash_keys}")


def check_kubernetes_placement(p: Problems, config: dict, workloads: dict, objects: dict) -> None:
    """Several data-workers: the leases layout for every role that takes
    part and no single worker's URL; each pod of the StatefulSet its own
    worker, named by the downward API, advertising its stable name under the
    headless governing Service, with its own volume from the claim template;
    replication on, since a worker taking over restores from object
    storage."""
    p.check(
        config.get(PLACEMENT) == PLACEMENT_LEASES,
        "ConfigMap sasha-config",
        f"{PLACEMENT} must be {PLACEMENT_LEASES} (several data-workers), is {config.get(PLACEMENT)!r}",
    )
    p.check(
        SINGLE_WORKER_URL not in config,
        "ConfigMap sasha-config",
        f"must not hold {SINGLE_WORKER_URL}: with leases each app's worker is asked of studio-core",
    )
    for role in PLACEMENT_ROLES:
        obj = workloads.get(role) or {}
        for container in (pod_spec(obj) or {}).get("containers") or []:
            w = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')} container {container.get('name')}"
            env = {e.get("name"): e for e in container.get("env") or []}
            if PLACEMENT in env:
                p.check(env[PLACEMENT].get("value") == PLACEMENT_LEASES, w, f"must not set {PLACEMENT} other than {PLACEMENT_LEASES}")
            p.check(SINGLE_WORKER_URL not in env, w, f"must not set {SINGLE_WORKER_URL}")

    data = workloads.get("data-worker") or {}
    spec = data.get("spec") or {}
    w = "StatefulSet/data-worker"
    pod = pod_spec(data) or {}
    container = next((c for c in pod.get("containers") or [] if container_role(c) == "data-worker"), {})
    c = f"{w} container {container.get('name')}"
    entries = container.get("env") or []
    names = [e.get("name") for e in entries]
    env = {e.get("name"): e for e in entries}
    worker_id = env.get(WORKER_ID) or {}
    p.check(
        ((worker_id.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") == "metadata.name",
        c,
        f"{WORKER_ID} must be the pod's name (valueFrom.fieldRef metadata.name): one worker per pod, stable across restarts",
    )
    service_name = spec.get("serviceName", "")
    service = objects.get(("Service", service_name)) or {}
    p.check(
        (service.get("spec") or {}).get("clusterIP") == "None",
        w,
        f"its serviceName {service_name!r} must be a headless Service (clusterIP: None): it names each pod",
    )
    ports = {port.get("name"): port.get("containerPort") for port in container.get("ports") or []}
    listen = addr_port(env.get("SASHA_DATA_GRPC_ADDR", {}).get("value", ""))
    expected = f"https://$({WORKER_ID}).{service_name}:{listen}"
    p.check(
        (env.get(ADVERTISE_URL) or {}).get("value") == expected and listen in ports.values(),
        c,
        f"{ADVERTISE_URL} must be {expected}: the pod's stable name under its headless Service",
    )
    if WORKER_ID in names and ADVERTISE_URL in names:
        p.check(
            names.index(WORKER_ID) < names.index(ADVERTISE_URL),
            c,
            f"{WORKER_ID} must come before {ADVERTISE_URL}, which refers to it",
        )
    folder = posixpath.normpath(storage_folders(config).get("APP_DATA_ROOT", ""))
    templates = {(t.get("metadata") or {}).get("name") for t in spec.get("volumeClaimTemplates") or []}
    mount = next(
        (m for m in container.get("volumeMounts") or [] if posixpath.normpath(m.get("mountPath", "")) == folder),
        {},
    )
    p.check(
        mount.get("name") in templates,
        c,
        f"APP_DATA_ROOT ({folder}) must come from a volumeClaimTemplate: every worker needs its own volume",
    )
    if (spec.get("replicas") or 0) > 1:
        replica_url = config.get("SASHA_REPLICA_URL", "")
        override = env.get("SASHA_REPLICA_URL")
        p.check(
            bool(replica_url) and (override is None or bool(override.get("value") or override.get("valueFrom"))),
            c,
            "several data-workers need replication: set SASHA_REPLICA_URL (a worker taking over a lost one's apps restores them from object storage; without it they wait for it)",
        )


def check_kubernetes_core_database(p: Problems, config: dict, core: dict, examples: list[dict]) -> None:
    """studio-core reads the core database's URL from a Secret: as the file
    DATABASE_URL_FILE names (a mounted Secret volume) or as DATABASE_URL from
    a secretKeyRef, never as a value in a manifest; and it sees
    SASHA_REPLICA_URL empty (sasha-config's value is data-worker's)."""
    w = "Deployment/studio-core container studio-core"
    p.check(
        CORE_DATABASE_URL not in config and not any(URL_WITH_PASSWORD.search(str(v)) for v in config.values()),
        "ConfigMap sasha-config",
        f"must not hold {CORE_DATABASE_URL} or a password: it goes in a Secret",
    )
    spec = pod_spec(core) or {}
    container = next((c for c in spec.get("containers") or [] if container_role(c) == "studio-core"), {})
    env = {e.get("name"): e for e in container.get("env") or []}
    for name, entry in env.items():
        p.check(not URL_WITH_PASSWORD.search(str(entry.get("value", ""))), w, f"{name} holds a password: take it from a Secret")
    secrets = {(d.get("metadata") or {}).get("name"): d for d in examples}

    def secret_keys(name: str) -> set[str]:
        secret = secrets.get(name) or {}
        return set(secret.get("stringData") or {}) | set(secret.get("data") or {})

    url, url_file = env.get(CORE_DATABASE_URL), env.get(CORE_DATABASE_FILE)
    if not p.check(
        (url is None) != (url_file is None),
        w,
        f"must set exactly one of {CORE_DATABASE_URL} (from a Secret) and {CORE_DATABASE_FILE} (a mounted Secret)",
    ):
        return
    if url is not None:
        ref = (url.get("valueFrom") or {}).get("secretKeyRef") or {}
        p.check("value" not in url and bool(ref), w, f"{CORE_DATABASE_URL} must come from a secretKeyRef")
        p.check(ref.get("key") in secret_keys(ref.get("name", "")), w, f"Secret {ref.get('name')} (deploy/k8s/secrets/) has no key {ref.get('key')}")
        p.check(ref.get("optional") is not True, w, f"{CORE_DATABASE_URL}'s Secret must not be optional")
    else:
        path = str(url_file.get("value", ""))
        mounts = {posixpath.normpath(m["mountPath"]): m for m in container.get("volumeMounts") or []}
        mount = mounts.get(posixpath.dirname(path))
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        secret = (volumes.get((mount or {}).get("name")) or {}).get("secret") or {}
        if p.check(
            mount is not None and mount.get("readOnly") is True and bool(secret),
            w,
            f"{CORE_DATABASE_FILE} ({path}) must be a file of a Secret volume mounted read-only",
        ):
            name = secret.get("secretName", "")
            items = {i.get("path"): i.get("key") for i in secret.get("items") or []}
            key = items.get(posixpath.basename(path), None if items else posixpath.basename(path))
            p.check(key in secret_keys(name), w, f"Secret {name} (deploy/k8s/secrets/) has no key for {path}")
            p.check(secret.get("optional") is not True, w, "the core database's Secret must not be optional")
    replica_url = env.get("SASHA_REPLICA_URL")
    p.check(
        "SASHA_REPLICA_URL" not in config or (replica_url is not None and replica_url.get("value") == "" and "valueFrom" not in replica_url),
        w,
        "must set SASHA_REPLICA_URL empty: sasha-config's is data-worker's, and studio-core refuses it beside a PostgreSQL core database",
    )


# ---------------------------------------------------------------------------
# Caddy


def caddy_handlers(routes: list, paths: tuple = ()) -> list[tuple[tuple, dict]]:
    """Every handler below routes, with the path matchers on the way to it."""
    found = []
    for route in routes or []:
        matched = paths
        for matcher in route.get("match") or []:
            if "path" in matcher:
                matched = matched + (tuple(matcher["path"]),)
        for handler in route.get("handle") or []:
            if handler.get("handler") == "subroute":
                found += caddy_handlers(handler.get("routes"), matched)
            else:
                found.append((matched, handler))
    return found


def check_caddy(root: Path, p: Problems, tls_cert: str | None, tls_key: str | None) -> None:
    where = "deploy/caddy/Caddyfile"
    caddyfile = root / "deploy" / "caddy" / "Caddyfile"
    caddy = os.environ.get("CADDY") or shutil.which("caddy")
    if not p.check(
        caddy is not None,
        where,
        "caddy is not installed; run scripts/test.sh, which installs Debian's caddy (or set CADDY)",
    ):
        return
    if not p.check(tls_cert is not None and tls_key is not None, where, "--tls-cert and --tls-key are needed"):
        return
    text = caddyfile.read_text()
    placeholders = set(re.findall(r"\{\$([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}", text))
    expected = set(CADDY_ENV) | {"SASHA_TLS_CERT_FILE", "SASHA_TLS_KEY_FILE"}
    p.check(placeholders == expected, where, f"uses the placeholders {sorted(placeholders)}, expected {sorted(expected)}")
    directives = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    p.check("trusted_proxies" not in directives, where, "must trust no proxy in front of it")

    with tempfile.TemporaryDirectory() as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "XDG_DATA_HOME": home,
            "XDG_CONFIG_HOME": home,
            **CADDY_ENV,
            "SASHA_TLS_CERT_FILE": tls_cert,
            "SASHA_TLS_KEY_FILE": tls_key,
        }
        common = ["--config", str(caddyfile), "--adapter", "caddyfile"]
        validate = subprocess.run([caddy, "validate", *common], env=env, capture_output=True, text=True)
        # Caddy logs JSON lines at info and warn level; the error is the rest.
        errors = [
            line
            for line in (validate.stdout + validate.stderr).splitlines()
            if line.strip() and not re.match(r'\{"level":"(info|warn|debug)"', line)
        ]
        if not p.check(validate.returncode == 0, where, "caddy validate failed: " + "\n".join(errors)):
            return
        adapt = subprocess.run([caddy, "adapt", *common], env=env, capture_output=True, text=True)
        if not p.check(adapt.returncode == 0, where, f"caddy adapt failed:\n{adapt.stderr}"):
            return
    config = json.loads(adapt.stdout)
    servers = ((config.get("apps") or {}).get("http") or {}).get("servers") or {}
    hosts = {}
    for server in servers.values():
        p.check("trusted_proxies" not in server, where, "a server trusts proxies")
        for route in server.get("routes") or []:
            for matcher in route.get("match") or []:
                for host in matcher.get("host") or []:
                    hosts[host] = caddy_handlers([{"handle": route.get("handle")}])
    p.check(set(hosts) == {CADDY_STUDIO_HOST, CADDY_SANDBOX_HOST}, where, f"serves {sorted(hosts)}, expected the two hosts")

    gateways = CADDY_ENV["MCP_GATEWAY_UPSTREAMS"].split()
    mcp_paths = (("/mcp", "/mcp/*"),)
    metadata_paths = ((OAUTH_RESOURCE_METADATA, f"{OAUTH_RESOURCE_METADATA}/*"),)
    for host, handlers in hosts.items():
        for paths, handler in handlers:
            if handler.get("handler") != "reverse_proxy":
                continue
            request = ((handler.get("headers") or {}).get("request")) or {}
            deleted = set(request.get("delete") or [])
            p.check({"Forwarded", "X-Real-IP"} <= deleted, where, f"{host} {paths}: must drop Forwarded and X-Real-IP")
            sets = request.get("set") or {}
            for name, value in (
                ("X-Forwarded-For", "{http.request.remote.host}"),
                ("X-Forwarded-Proto", "{http.request.scheme}"),
                ("X-Forwarded-Host", "{http.request.host}"),
            ):
                p.check(sets.get(name) == [value], where, f"{host} {paths}: must set (not append) {name} to {value}")
            p.check("add" not in request, where, f"{host} {paths}: must not append request headers")
            p.check(
                "Host" not in sets and "Host" not in deleted,
                where,
                f"{host} {paths}: must pass Host through unchanged",
            )

    def proxies(handlers: list, paths: tuple) -> list[dict]:
        return [h for ps, h in handlers if ps == paths and h.get("handler") == "reverse_proxy"]

    def body_limit(handlers: list, paths: tuple) -> int | None:
        limits = [h.get("max_size") for ps, h in handlers if ps == paths and h.get("handler") == "request_body"]
        return limits[0] if len(limits) == 1 else None

    studio = hosts.get(CADDY_STUDIO_HOST, [])
    mcp = proxies(studio, mcp_paths)
    if p.check(len(mcp) == 1, where, "the studio host must proxy /mcp and /mcp/* to the gateways"):
        handler = mcp[0]
        p.check([u.get("dial") for u in handler.get("upstreams") or []] == gateways, where, "/mcp must reach every gateway replica")
        policy = ((handler.get("load_balancing") or {}).get("selection_policy")) or {}
        p.check(policy == {"policy": "header", "field": "Authorization"}, where, f"/mcp must balance on the client's credential (Authorization), does {policy}")
        p.check(handler.get("flush_interval") == -1, where, "/mcp must flush at once (flush_interval -1)")
    p.check(body_limit(studio, mcp_paths) == 37 * MIB, where, "/mcp bodies must be limited to 37 MiB")
    metadata = proxies(studio, metadata_paths)
    p.check(
        len(metadata) == 1 and [u.get("dial") for u in metadata[0].get("upstreams") or []] == gateways,
        where,
        f"the studio host must proxy {OAUTH_RESOURCE_METADATA} and {OAUTH_RESOURCE_METADATA}/* to every gateway replica",
    )
    limit = body_limit(studio, metadata_paths)
    p.check(limit is not None and limit <= MIB, where, f"{OAUTH_RESOURCE_METADATA} bodies must be small, limit is {limit}")
    rest = proxies(studio, ())
    if p.check(
        len(rest) == 1 and [u.get("dial") for u in rest[0].get("upstreams") or []] == CADDY_ENV["STUDIO_CORE_UPSTREAMS"].split(),
        where,
        "everything else on the studio host must reach every studio-core replica",
    ):
        p.check(
            ((rest[0].get("load_balancing") or {}).get("try_duration") or 0) > 0,
            where,
            "studio-core's route must retry another replica when one refuses (lb_try_duration)",
        )
    limit = body_limit(studio, ())
    p.check(limit is not None and limit <= MIB, where, f"studio-core bodies must be small, limit is {limit}")
    p.check(
        {paths for paths, h in studio if h.get("handler") == "reverse_proxy"} == {mcp_paths, metadata_paths, ()},
        where,
        f"the studio host must have exactly three routes: /mcp, {OAUTH_RESOURCE_METADATA} and the rest",
    )
    sandbox = hosts.get(CADDY_SANDBOX_HOST, [])
    sandbox_proxies = [h for _, h in sandbox if h.get("handler") == "reverse_proxy"]
    p.check(
        len(sandbox_proxies) >= 1
        and all([u.get("dial") for u in h.get("upstreams") or []] == [CADDY_ENV["EDGE_SANDBOX_HTTP"]] for h in sandbox_proxies),
        where,
        "the sandbox host must reach edge-sandbox only",
    )
    p.check(all(paths == () for paths, _ in sandbox), where, "the sandbox host must send every path to edge-sandbox")
    limit = body_limit(sandbox, ())
    p.check(limit is not None and limit <= MIB, where, f"sandbox bodies must be small, limit is {limit}")


# ---------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", metavar="PART", help="dockerfile, compose, kubernetes or caddy (default: all)")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    args = parser.parse_args()
    known = ["dockerfile", "compose", "kubernetes", "caddy"]
    parts = args.parts or known
    unknown = [part for part in parts if part not in known]
    if unknown:
        parser.error(f"unknown part(s) {unknown}; choose from {known}")
    root = Path(args.root)

    failed = False
    # The image's ENV is what compose and Kubernetes must agree with; its
    # problems are reported under "dockerfile".
    dockerfile_problems = Problems()
    image_env = check_dockerfile(root, dockerfile_problems)
    for part in parts:
        p = Problems()
        if part == "dockerfile":
            p = dockerfile_problems
        elif part == "compose":
            check_compose(root, p, image_env)
        elif part == "kubernetes":
            check_kubernetes(root, p, image_env)
        elif part == "caddy":
            check_caddy(root, p, args.tls_cert, args.tls_key)
        if p.found:
            failed = True
            print(f"{part}: {len(p.found)} problem(s)")
            for problem in p.found:
                print(f"  - {problem}")
        else:
            print(f"{part}: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
