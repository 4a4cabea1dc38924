//! Writes a seed corpus for the fuzz targets: a small valid state and a
//! stream carrying it. Run `cargo run --bin make_seeds` inside `fuzz/`.

use std::fs;
use std::path::Path;

use vgpu_migration::*;

fn state() -> VgpuState {
    let guest = |handle| Some(GuestRef { handle, refs: 1 });
    VgpuStateV1 {
        profile: Profile {
            max_work_item_sizes: vec![1024, 1024, 64],
            extensions: Profile::parse_extensions("cl_khr_fp64"),
            ..Profile::default()
        },
        device: DeviceIdentity::default(),
        sessions: vec![SessionStateV1 {
            id: 1,
            protocol_version: 1,
            contexts: vec![ContextState {
                id: 1,
                guest: guest(1),
                properties: vec![],
            }],
            queues: vec![QueueState {
                id: 2,
                guest: guest(2),
                context: 1,
                properties: vec![],
            }],
            buffers: vec![BufferState {
                id: 3,
                guest: guest(3),
                context: 1,
                flags: 1,
                size: 64,
                parent: None,
            }],
            programs: vec![ProgramState {
                id: 4,
                guest: None,
                context: 1,
                origin: ProgramOrigin::Linked(vec![LinkInput {
                    origin: ProgramOrigin::Source(b"kernel void k() {}".to_vec()),
                    compile_options: vec![],
                }]),
                build: ProgramBuild::Built { options: vec![] },
                executable: None,
            }],
            kernels: vec![KernelState {
                id: 5,
                guest: guest(5),
                program: 4,
                name: "k".into(),
                args: vec![KernelArg::Buffer(3), KernelArg::Local(16), KernelArg::Unset],
            }],
            events: vec![EventState {
                id: 6,
                guest: guest(6),
                context: 1,
                kind: EventKind::User { status: 2 },
            }],
            ..SessionStateV1::default()
        }
        .into()],
    }
    .into()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let state = state();
    let mut w = StreamWriter::new(Vec::new())?;
    w.write_state(&state)?;
    w.write_buffer_chunk(1, 3, 0, &[7; 32])?;
    w.write_buffer_chunk(1, 3, 32, &[9; 32])?;
    let (stream, _) = w.finish()?;
    // The sealed target's input format: u32 kind, u16 length, payload.
    let mut sealed = Vec::new();
    let mut at = stream::HEADER_LEN as usize;
    while at < stream.len() {
        let kind = &stream[at..at + 4];
        let len = u64::from_le_bytes(stream[at + 4..at + 12].try_into()?) as usize;
        if kind != 3u32.to_le_bytes() {
            sealed.extend_from_slice(kind);
            sealed.extend_from_slice(&u16::try_from(len)?.to_le_bytes());
            sealed.extend_from_slice(&stream[at + 12..at + 12 + len]);
        }
        at += 16 + len;
    }
    for (target, bytes) in [
        ("state_decode", state.to_bytes()),
        ("stream_reader", stream),
        ("stream_sealed", sealed),
    ] {
        let dir = Path::new("corpus").join(target);
        fs::create_dir_all(&dir)?;
        fs::write(dir.join("seed"), bytes)?;
    }
    Ok(())
}
