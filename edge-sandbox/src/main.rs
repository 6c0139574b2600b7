//! The edge-sandbox binary: `sasha serve edge-sandbox` without the CLI.

fn main() -> std::process::ExitCode {
    sasha_proto::process::run_role(sasha_proto::Role::EdgeSandbox, edge_sandbox::serve_from_env)
}
