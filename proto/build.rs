//! Compiles the gRPC contracts with the protoc binary vendored as a crate, so a
//! fresh machine builds with plain `cargo build` and no system protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/sasha/v1/common.proto",
        "proto/sasha/v1/contract.proto",
        "proto/sasha/v1/convert.proto",
        "proto/sasha/v1/core.proto",
        "proto/sasha/v1/data.proto",
        "proto/sasha/v1/placement.proto",
    ];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure().compile_with_config(config, &protos, &["proto"])?;
    Ok(())
}
