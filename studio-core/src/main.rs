//! The studio-core binary: `sasha serve studio-core` without the CLI.

fn main() -> std::process::ExitCode {
    sasha_service::process::run_role(sasha_service::Role::StudioCore, studio_core::serve_from_env)
}
