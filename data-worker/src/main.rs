//! The data-worker binary: `sasha serve data-worker` without the CLI.

fn main() -> std::process::ExitCode {
    sasha_proto::process::run_role(sasha_proto::Role::DataWorker, data_worker::serve_from_env)
}
