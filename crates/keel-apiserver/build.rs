//! Compiles the protobuf schema of the Kubernetes kinds served (`proto/`, written by
//! `scripts/k8s-protobuf-schema.py`) with protox (pure Rust: no system `protoc` needed) into a
//! `FileDescriptorSet` in `OUT_DIR`, which `src/http/protobuf.rs` decodes bodies with.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/k8s.io/api/core/v1/schema.proto",
        "proto/k8s.io/api/coordination/v1/schema.proto",
        "proto/k8s.io/api/events/v1/schema.proto",
        "proto/k8s.io/apimachinery/pkg/runtime/schema.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true).open_files(files)?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("k8s.fds"), compiler.encode_file_descriptor_set())?;
    Ok(())
}
