//! Compiles the protobuf schema of the Kubernetes kinds served (`proto/`, written by
//! `scripts/k8s-protobuf-schema.py`) with protox (pure Rust: no system `protoc` needed) into a
//! `FileDescriptorSet` in `OUT_DIR`, which `src/http/protobuf.rs` decodes bodies with.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let mut files = Vec::new();
    schema_files(std::path::Path::new("proto/k8s.io"), &mut files)?;
    files.sort();
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true).open_files(files)?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // Written beside and renamed into place: a target folder whose files are hard links to
    // another's (`cp -al`) then gets a file of its own instead of rewriting the shared one.
    let staged = out.join("k8s.fds.new");
    std::fs::write(&staged, compiler.encode_file_descriptor_set())?;
    std::fs::rename(staged, out.join("k8s.fds"))?;
    Ok(())
}

/// Every `schema.proto` below `dir`.
fn schema_files(
    dir: &std::path::Path,
    out: &mut Vec<std::path::PathBuf>,
) -> Result<(), Box<dyn std::error::Error>> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            schema_files(&path, out)?;
        } else if path.file_name().is_some_and(|n| n == "schema.proto") {
            out.push(path);
        }
    }
    Ok(())
}
