//! The mcp-gateway binary: `sasha serve mcp-gateway` without the CLI.

fn main() -> std::process::ExitCode {
    sasha_service::process::run_role(sasha_service::Role::McpGateway, mcp_gateway::serve_from_env)
}
