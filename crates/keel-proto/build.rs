//! Compiles the etcd v3 API protos with protox (pure Rust: no system `protoc` needed), and
//! generates a second server stub for `etcdserverpb.Watch` whose responses are sent already
//! encoded (see `src/encoded.rs`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/etcd/api/etcdserverpb/rpc.proto",
        "proto/etcd/api/mvccpb/kv.proto",
        "proto/etcd/api/authpb/auth.proto",
        "proto/keel/raftpb/peer.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;

    let watch = tonic_build::manual::Service::builder()
        .name("Watch")
        .package("etcdserverpb")
        .method(
            tonic_build::manual::Method::builder()
                .name("watch")
                .route_name("Watch")
                .input_type("crate::etcdserverpb::WatchRequest")
                .output_type("crate::encoded::PreEncoded")
                .codec_path("crate::encoded::PreEncodedCodec")
                .client_streaming()
                .server_streaming()
                .build(),
        )
        .build();
    tonic_build::manual::Builder::new()
        .build_client(false)
        .build_transport(false)
        .compile(&[watch]);
    Ok(())
}
