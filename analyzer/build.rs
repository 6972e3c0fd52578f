//! Generates the Rust messages of `proto/perfetto_trace.proto` (the part of Perfetto's
//! trace schema the Perfetto exporter writes) into `$OUT_DIR/perfetto_proto/`.

fn main() {
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .input("proto/perfetto_trace.proto")
        .cargo_out_dir("perfetto_proto")
        .run_from_script();
}
