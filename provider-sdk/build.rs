//! Compiles the provider contract with protox (no protoc needed), writes the descriptor set that gRPC
//! reflection serves, and derives the list of fields marked `(sensitive) = true` so that redaction follows
//! the proto instead of a hand-kept list.

use std::{env, fs, path::PathBuf};

use prost_reflect::{DescriptorPool, Value};

const PROTO_ROOT: &str = "../proto";
const PROTO_FILE: &str = "egressproxies/provider/v1/provider.proto";
const SENSITIVE_OPTION: &str = "egressproxies.provider.v1.sensitive";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_ROOT}");
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);

    let mut compiler = protox::Compiler::new([PROTO_ROOT])?;
    compiler.include_imports(true).open_file(PROTO_FILE)?;
    // The pool keeps custom options, which the prost_types descriptor set drops.
    let pool = compiler.descriptor_pool();
    fs::write(out_dir.join("sensitive_fields.rs"), sensitive_fields_source(&pool)?)?;

    let fds = compiler.file_descriptor_set();
    fs::write(
        out_dir.join("provider_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}

fn sensitive_fields_source(pool: &DescriptorPool) -> Result<String, Box<dyn std::error::Error>> {
    let option = pool
        .get_extension_by_name(SENSITIVE_OPTION)
        .ok_or("the sensitive field option is missing from the contract")?;
    let mut fields: Vec<String> = pool
        .all_messages()
        .flat_map(|message| message.fields().collect::<Vec<_>>())
        .filter(|field| {
            let options = field.options();
            options.has_extension(&option) && matches!(*options.get_extension(&option), Value::Bool(true))
        })
        .map(|field| field.full_name().to_owned())
        .collect();
    fields.sort();
    let mut source = String::from("/// Every contract field marked `(sensitive) = true`, by full name.\n");
    source.push_str("pub const SENSITIVE_FIELDS: &[&str] = &[\n");
    for field in fields {
        source.push_str(&format!("    {field:?},\n"));
    }
    source.push_str("];\n");
    Ok(source)
}
