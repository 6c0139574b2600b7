//! The edge-sandbox binary: `sasha serve edge-sandbox` without the CLI.

fn main() -> std::process::ExitCode {
    sasha_service::process::run_role(
        sasha_service::Role::EdgeSandbox,
        edge_sandbox::serve_from_env,
    )
}
