//! The deployment files, checked by real validators (no cluster runs here;
//! `deploy/test-compose.sh` starts the compose stack itself under podman):
//! `tests/deploy/validate.py` parses the Dockerfile with
//! BuildKit's parser, validates `deploy/compose.yaml` against the Compose
//! Specification's JSON schema, every manifest under `deploy/k8s/` against the
//! Kubernetes JSON schemas (strict), and `deploy/caddy/Caddyfile` with Debian's
//! `caddy validate` and `caddy adapt`; then it checks that the files agree with
//! each other and with the platform's rules (separate state volumes, the
//! PostgreSQL core database with its password and URL from secret files,
//! studio-core and the gateway scalable, several data-workers holding leases,
//! each with its own name, volume, replicator and address, replicas spread
//! over nodes with disruption budgets, one trusted hop, certificates,
//! origins, probes, grace periods). Each test fails with the validator's
//! report.
//!
//! `scripts/test.sh` installs the validators into `$CARGO_TARGET_DIR/deploy-venv`
//! (from `tests/deploy/requirements.txt`) and Debian's caddy; without them these
//! tests fail rather than skip.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's Python (`SASHA_DEPLOY_VENV`, else `$CARGO_TARGET_DIR/deploy-venv`).
fn python() -> PathBuf {
    let venv = std::env::var_os("SASHA_DEPLOY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
            tmp.parent().unwrap_or(tmp).join("deploy-venv")
        });
    let python = venv.join("bin").join("python");
    assert!(
        python.is_file(),
        "{} is missing: run ./scripts/test.sh, which installs the deployment validators \
         (tests/deploy/requirements.txt) into that venv (or point SASHA_DEPLOY_VENV at one)",
        python.display()
    );
    python
}

/// A self-signed certificate for the Caddyfile's two example hostnames, which
/// `caddy validate` loads.
struct PublicTls {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
}

fn public_tls() -> PublicTls {
    let certified = rcgen::generate_simple_self_signed(vec![
        "studio.example.com".to_owned(),
        "views.example.net".to_owned(),
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    PublicTls {
        _dir: dir,
        cert,
        key,
    }
}

/// Runs the validator on `part` of the files below `files_root`: its exit
/// status and its report.
fn validate(files_root: &Path, part: &str) -> (bool, String) {
    let tls = public_tls();
    let output = Command::new(python())
        .arg(root().join("tests/deploy/validate.py"))
        .arg("--root")
        .arg(files_root)
        .arg("--tls-cert")
        .arg(&tls.cert)
        .arg("--tls-key")
        .arg(&tls.key)
        .arg(part)
        .output()
        .expect("run tests/deploy/validate.py");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), report)
}

fn assert_valid(part: &str) {
    let (ok, report) = validate(root(), part);
    assert!(ok, "the {part} check failed:\n{report}");
    assert!(report.contains(&format!("{part}: ok")), "{report}");
}

#[test]
fn dockerfile_builds_one_non_root_image_for_every_role() {
    assert_valid("dockerfile");
}

#[test]
fn compose_file_matches_the_compose_spec_and_the_layout_rules() {
    assert_valid("compose");
}

#[test]
fn kubernetes_manifests_match_the_schemas_and_each_other() {
    assert_valid("kubernetes");
}

#[test]
fn caddyfile_is_valid_and_routes_like_the_nginx_proxy() {
    assert_valid("caddy");
}

/// A copy of the deployment files in a temporary folder, one of them changed.
fn broken_copy(file: &str, from: &str, to: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["Dockerfile", ".dockerignore"] {
        std::fs::copy(root().join(name), dir.path().join(name)).unwrap();
    }
    copy_tree(&root().join("deploy"), &dir.path().join("deploy"));
    let path = dir.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} no longer contains {from:?}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The validators are not a rubber stamp: one wrong field in each kind of file
/// fails its check, naming the problem.
#[test]
fn a_broken_field_fails_each_check() {
    let cases = [
        // Compose: a key the Compose Specification does not have.
        (
            "compose",
            "deploy/compose.yaml",
            "    restart: \"no\"\n",
            "    restart: \"no\"\n    restart_policy: never\n",
            "'restart_policy' was unexpected",
        ),
        // Compose: the roles' spans sent somewhere other than the collector.
        (
            "compose",
            "deploy/compose.yaml",
            "OTEL_EXPORTER_OTLP_ENDPOINT: ${OTEL_EXPORTER_OTLP_ENDPOINT:-}",
            "OTEL_EXPORTER_OTLP_ENDPOINT: ${OTEL_EXPORTER_OTLP_ENDPOINT:-http://elsewhere:4317}",
            "or to the otel-collector service",
        ),
        // Compose: the trace viewer started by every `up`.
        (
            "compose",
            "deploy/compose.yaml",
            "  jaeger:\n    <<: *hardening\n    profiles: [traces]\n",
            "  jaeger:\n    <<: *hardening\n",
            "must be in the traces profile",
        ),
        // Kubernetes: sasha-config naming no collector Service.
        (
            "kubernetes",
            "deploy/k8s/10-config.yaml",
            "OTEL_EXPORTER_OTLP_ENDPOINT: http://otel-collector:4317",
            "OTEL_EXPORTER_OTLP_ENDPOINT: http://otel-collector:4318",
            "must name the collector's Service and port",
        ),
        // Compose: studio-core's working copy of the packages on a named
        // volume, which its replicas would share.
        (
            "compose",
            "deploy/compose.yaml",
            "      - certs:/certs:ro\n    networks:\n      backend:\n        aliases: [studio-core.sasha.internal]",
            "      - app-data:/var/lib/sasha/docs\n      - certs:/certs:ro\n    networks:\n      backend:\n        aliases: [studio-core.sasha.internal]",
            "DOCS_ROOT (/var/lib/sasha/docs) must not be on a volume: replicas would share it",
        ),
        // Compose: studio-core's working copy in the read-only image.
        (
            "compose",
            "deploy/compose.yaml",
            "      - /var/lib/sasha/docs:${SASHA_TMPFS_OPTIONS:-uid=10001,gid=10001,mode=0750}\n",
            "",
            "it must be a tmpfs of the service, one per replica",
        ),
        // Compose: a worker's replicator on another volume than the
        // worker's databases (it would replicate files it cannot see).
        (
            "compose",
            "deploy/compose.yaml",
            "      - app-data-1:/var/lib/sasha/app-data\n    networks:\n      egress: {}",
            "      - backups:/var/lib/sasha/app-data\n    networks:\n      egress: {}",
            "service data-worker-1: needs exactly one replicator",
        ),
        // Compose: the second worker's replicator on the first worker's
        // volume: one worker replicated twice, the other not at all.
        (
            "compose",
            "deploy/compose.yaml",
            "      - app-data-2:/var/lib/sasha/app-data\n    networks:\n      egress: {}",
            "      - app-data-1:/var/lib/sasha/app-data\n    networks:\n      egress: {}",
            "service data-worker-2: needs exactly one replicator",
        ),
        // Compose: two workers on one volume of app databases.
        (
            "compose",
            "deploy/compose.yaml",
            "      - app-data-2:/var/lib/sasha/app-data\n      - certs:/certs:ro",
            "      - app-data-1:/var/lib/sasha/app-data\n      - certs:/certs:ro",
            "every data-worker needs its own volume of APP_DATA_ROOT",
        ),
        // Compose: a worker without its name in the placement.
        (
            "compose",
            "deploy/compose.yaml",
            "      SASHA_DATA_WORKER_ID: data-worker-2\n",
            "",
            "service data-worker-2: must be named by SASHA_DATA_WORKER_ID",
        ),
        // Compose: a worker advertising the other's address.
        (
            "compose",
            "deploy/compose.yaml",
            "SASHA_DATA_ADVERTISE_URL: https://data-worker-2:3013",
            "SASHA_DATA_ADVERTISE_URL: https://data-worker-1:3013",
            "SASHA_DATA_ADVERTISE_URL must be https://<this service>:3013",
        ),
        // Compose: studio-core left in the single layout.
        (
            "compose",
            "deploy/compose.yaml",
            "*internal-ca, *core-database, *placement]",
            "*internal-ca, *core-database]",
            "service studio-core: SASHA_DATA_PLACEMENT must be leases",
        ),
        // Compose: the gateway given one worker's URL.
        (
            "compose",
            "deploy/compose.yaml",
            "      SASHA_GATEWAY_HTTP_ADDR: 0.0.0.0:3014\n",
            "      SASHA_GATEWAY_HTTP_ADDR: 0.0.0.0:3014\n      SASHA_DATA_GRPC_URL: https://data-worker-1:3013\n",
            "must not pass SASHA_DATA_GRPC_URL",
        ),
        // Compose: a worker starting before studio-core, whose leases it
        // needs.
        (
            "compose",
            "deploy/compose.yaml",
            "      studio-core:\n        condition: service_healthy\n      data-worker-1-replicator:",
            "      data-worker-1-replicator:",
            "service data-worker-1: must depend on studio-core with condition service_healthy",
        ),
        // Compose: studio-core starting before PostgreSQL accepts connections.
        (
            "compose",
            "deploy/compose.yaml",
            "      postgres:\n        condition: service_healthy\n",
            "      postgres:\n        condition: service_started\n",
            "must depend on postgres with condition service_healthy",
        ),
        // Compose: the core database's URL, password and all, written inline.
        (
            "compose",
            "deploy/compose.yaml",
            "  DATABASE_URL_FILE: /run/secrets/core-database-url\n",
            "  DATABASE_URL: postgres://sasha:hunter2@postgres:5432/sasha\n",
            "DATABASE_URL must not be set: read it from a secret (DATABASE_URL_FILE)",
        ),
        // Compose: pg_isready on the socket, which answers while a new volume
        // is still being initialized.
        (
            "compose",
            "deploy/compose.yaml",
            "\"pg_isready\", \"--host=127.0.0.1\", ",
            "\"pg_isready\", ",
            "the healthcheck must ask pg_isready over TCP",
        ),
        // Compose: one fixed studio-core container, which cannot scale.
        (
            "compose",
            "deploy/compose.yaml",
            "    deploy:\n      mode: replicated\n      replicas: 2\n",
            "    container_name: studio-core\n",
            "studio-core must not set container_name: it is scaled",
        ),
        // Kubernetes: data-worker's replicator as a plain init container,
        // which would have to finish before the role starts.
        (
            "kubernetes",
            "deploy/k8s/30-data-worker.yaml",
            "          restartPolicy: Always\n",
            "",
            "must be a native sidecar (restartPolicy: Always)",
        ),
        // Kubernetes: back to one data-worker.
        (
            "kubernetes",
            "deploy/k8s/30-data-worker.yaml",
            "  replicas: 3\n",
            "  replicas: 1\n",
            "must be a StatefulSet of at least 2 replicas",
        ),
        // Kubernetes: every pod given the same worker name.
        (
            "kubernetes",
            "deploy/k8s/30-data-worker.yaml",
            "              valueFrom:\n                fieldRef:\n                  fieldPath: metadata.name\n",
            "              value: data-worker\n",
            "SASHA_DATA_WORKER_ID must be the pod's name",
        ),
        // Kubernetes: every pod advertising the Service, not itself.
        (
            "kubernetes",
            "deploy/k8s/30-data-worker.yaml",
            "value: https://$(SASHA_DATA_WORKER_ID).data-worker:3013",
            "value: https://data-worker:3013",
            "SASHA_DATA_ADVERTISE_URL must be https://$(SASHA_DATA_WORKER_ID).data-worker:3013",
        ),
        // Kubernetes: several workers without replication.
        (
            "kubernetes",
            "deploy/k8s/10-config.yaml",
            "  SASHA_REPLICA_URL: s3://sasha-replica/sasha?region=eu-west-1\n",
            "  SASHA_REPLICA_URL: \"\"\n",
            "several data-workers need replication",
        ),
        // Kubernetes: the single layout in sasha-config.
        (
            "kubernetes",
            "deploy/k8s/10-config.yaml",
            "  SASHA_DATA_PLACEMENT: leases\n",
            "  SASHA_DATA_PLACEMENT: single\n",
            "SASHA_DATA_PLACEMENT must be leases",
        ),
        // Kubernetes: studio-core closed to the workers renewing their
        // leases.
        (
            "kubernetes",
            "deploy/k8s/80-network-policy.yaml",
            "                values: [mcp-gateway, data-worker]\n",
            "                values: [mcp-gateway]\n",
            "NetworkPolicy for studio-core: admits ['mcp-gateway'], its callers are ['data-worker', 'mcp-gateway']",
        ),
        // Kubernetes: a port that is not an integer, against the schema.
        (
            "kubernetes",
            "deploy/k8s/60-edge-sandbox.yaml",
            "containerPort: 3010",
            "containerPort: \"3010\"",
            "'3010' is not of type 'integer'",
        ),
        // Kubernetes: studio-core back to one replica.
        (
            "kubernetes",
            "deploy/k8s/40-studio-core.yaml",
            "  replicas: 2\n",
            "  replicas: 1\n",
            "must be a Deployment of at least 2 replicas",
        ),
        // Kubernetes: studio-core's disruption budget selecting no pod.
        (
            "kubernetes",
            "deploy/k8s/40-studio-core.yaml",
            "  minAvailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: studio-core\n",
            "  minAvailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: studio-core-old\n",
            "studio-core: runs several replicas: needs a PodDisruptionBudget",
        ),
        // Kubernetes: the core database's URL as a plain value.
        (
            "kubernetes",
            "deploy/k8s/40-studio-core.yaml",
            "            - name: DATABASE_URL_FILE\n              value: /etc/sasha/database/url\n",
            "            - name: DATABASE_URL\n              value: postgres://sasha:hunter2@db:5432/sasha\n",
            "DATABASE_URL must come from a secretKeyRef",
        ),
        // Kubernetes: sasha-config's replication URL reaching studio-core,
        // which refuses it beside a PostgreSQL core database.
        (
            "kubernetes",
            "deploy/k8s/40-studio-core.yaml",
            "            - name: SASHA_REPLICA_URL\n              value: \"\"\n",
            "",
            "must set SASHA_REPLICA_URL empty",
        ),
        // Kubernetes: studio-core's working copy of the packages on a
        // persistent volume, which would have to follow pods between nodes.
        (
            "kubernetes",
            "deploy/k8s/40-studio-core.yaml",
            "          emptyDir:\n            sizeLimit: 1Gi\n",
            "          persistentVolumeClaim:\n            claimName: docs\n",
            "DOCS_ROOT is a working copy of the core database: it must be an emptyDir",
        ),
        // Kubernetes: a field the schema does not know (strict validation).
        (
            "kubernetes",
            "deploy/k8s/40-studio-core.yaml",
            "  strategy:\n",
            "  strateggy:\n",
            "'strateggy' was unexpected",
        ),
        // Kubernetes: the MCP resource's OAuth metadata (RFC 9728) sent to
        // studio-core instead of the gateway.
        (
            "kubernetes",
            "deploy/k8s/70-ingress.yaml",
            "          - path: /.well-known/oauth-protected-resource\n            pathType: Prefix\n            backend:\n              service:\n                name: mcp-gateway",
            "          - path: /.well-known/oauth-protected-resource\n            pathType: Prefix\n            backend:\n              service:\n                name: studio-core",
            "routes must be exactly",
        ),
        // Kubernetes: the metadata Ingress without /mcp's hash key (ingress-nginx
        // could take its missing key for the upstream both share).
        (
            "kubernetes",
            "deploy/k8s/70-ingress.yaml",
            "    # of /mcp off.\n    nginx.ingress.kubernetes.io/upstream-hash-by: \"$http_authorization$remote_addr\"\n",
            "    # of /mcp off.\n",
            "every Ingress of the gateway must hash alike",
        ),
        // Caddy: the OAuth metadata route reaching studio-core.
        (
            "caddy",
            "deploy/caddy/Caddyfile",
            "handle @mcp_metadata {\n\t\trequest_body {\n\t\t\tmax_size 1KiB\n\t\t}\n\t\treverse_proxy {$MCP_GATEWAY_UPSTREAMS}",
            "handle @mcp_metadata {\n\t\trequest_body {\n\t\t\tmax_size 1KiB\n\t\t}\n\t\treverse_proxy {$STUDIO_CORE_UPSTREAMS}",
            "/.well-known/oauth-protected-resource/* to every gateway replica",
        ),
        // Caddy: studio-core's replicas without a retry on the next one.
        (
            "caddy",
            "deploy/caddy/Caddyfile",
            "\t\t\tlb_try_duration 5s\n\t\t\tfail_duration 10s\n",
            "\t\t\tfail_duration 10s\n",
            "studio-core's route must retry another replica when one refuses",
        ),
        // Caddy: an unknown subdirective.
        (
            "caddy",
            "deploy/caddy/Caddyfile",
            "flush_interval -1",
            "flush_intervall -1",
            "unrecognized subdirective flush_intervall",
        ),
        // Dockerfile: a prebuilt image that also builds (or adds) more.
        (
            "dockerfile",
            "Dockerfile",
            "FROM base AS prebuilt\nCOPY sasha /usr/local/bin/sasha\n",
            "FROM base AS prebuilt\nCOPY sasha /usr/local/bin/sasha\nCOPY sasha /usr/local/bin/other\n",
            "the prebuilt stage must only COPY the sasha binary",
        ),
        // Dockerfile: running as root.
        (
            "dockerfile",
            "Dockerfile",
            "USER 10001:10001",
            "USER root",
            "the runtime user must be 10001:10001",
        ),
    ];
    for (part, file, from, to, expected) in cases {
        let copy = broken_copy(file, from, to);
        let (ok, report) = validate(copy.path(), part);
        assert!(!ok, "{file} with {to:?} passed the {part} check:\n{report}");
        assert!(
            report.contains(expected),
            "{file} with {to:?}: the report does not say {expected:?}:\n{report}"
        );
    }
}
