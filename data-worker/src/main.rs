//! The data-worker binary: `sasha serve data-worker` without the CLI.

fn main() -> std::process::ExitCode {
    sasha_service::process::run_role(sasha_service::Role::DataWorker, data_worker::serve_from_env)
}
