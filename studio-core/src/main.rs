//! The studio-core binary: `sasha serve studio-core` without the CLI.

fn main() -> std::process::ExitCode {
    sasha_proto::process::run_role(sasha_proto::Role::StudioCore, studio_core::serve_from_env)
}
