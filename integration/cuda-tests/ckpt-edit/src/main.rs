//! `ckpt-edit summary FILE`: the sessions of a checkpoint and their CUDA
//! objects, one line each.
//! `ckpt-edit retarget IN OUT SM`: rewrites IN as if every CUDA module held
//! only a cubin for `sm_<SM>` (no PTX), so a restore on a GPU of another
//! architecture must refuse it before building anything.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::process::ExitCode;

use vgpu_migration::{
    CudaArch, CudaSessionState, CudaState, ExecutorState, Item, SessionState, StreamReader,
    StreamWriter, VgpuState,
};

/// The session's CUDA part, if it has one.
fn cuda_part(parts: &mut [ExecutorState]) -> Option<&mut CudaSessionState> {
    parts.iter_mut().find_map(|p| match p {
        ExecutorState::Cuda(CudaState::V2(c)) => Some(c),
        _ => None,
    })
}

fn summary(path: &str) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut reader = StreamReader::new(BufReader::new(file)).map_err(|e| e.to_string())?;
    while let Some(item) = reader.next_item().map_err(|e| e.to_string())? {
        match item {
            Item::State(state) => {
                let VgpuState::V1(state) = *state;
                for session in &state.sessions {
                    let version = session.version();
                    let mut s = session.clone().latest();
                    print!("session {} (state v{version}):", s.id);
                    match cuda_part(&mut s.parts) {
                        None => println!(" no CUDA objects"),
                        Some(c) => {
                            println!(
                                " CUDA on {} ({}), {} context(s), {} allocation(s) of {} bytes, {} stream(s), {} event(s), {} function(s)",
                                c.device.name,
                                c.device.arch,
                                c.contexts.len(),
                                c.allocations.len(),
                                c.allocated_bytes(),
                                c.streams.len(),
                                c.events.len(),
                                c.functions.len()
                            );
                            for m in &c.modules {
                                let cubins: Vec<String> =
                                    m.cubin_archs.iter().map(ToString::to_string).collect();
                                println!(
                                    "  module {:#x}: {:?}, {} bytes, PTX {}, cubins [{}]",
                                    m.id,
                                    m.kind,
                                    m.image.len(),
                                    m.ptx_target.map_or("none".into(), |t| t.to_string()),
                                    cubins.join(", ")
                                );
                            }
                            for g in &c.globals {
                                println!(
                                    "  global {} at {:#x}, {} bytes",
                                    String::from_utf8_lossy(&g.name),
                                    g.address,
                                    g.size
                                );
                            }
                        }
                    }
                }
            }
            Item::BufferChunk { .. } | Item::Base { .. } | Item::BaseRef { .. } => {}
            Item::End(s) => println!(
                "stream: {} bytes, {} of buffer contents",
                s.stream_bytes, s.buffer_bytes
            ),
        }
    }
    Ok(())
}

fn retarget(input: &str, output: &str, sm: u32) -> Result<(), String> {
    let file = File::open(input).map_err(|e| format!("{input}: {e}"))?;
    let mut reader = StreamReader::new(BufReader::new(file)).map_err(|e| e.to_string())?;
    let out = File::create(output).map_err(|e| format!("{output}: {e}"))?;
    let mut writer = StreamWriter::new(BufWriter::new(out)).map_err(|e| e.to_string())?;
    while let Some(item) = reader.next_item().map_err(|e| e.to_string())? {
        match item {
            Item::State(state) => {
                let VgpuState::V1(mut state) = *state;
                for session in state.sessions.iter_mut() {
                    let mut s = session.clone().latest();
                    for m in cuda_part(&mut s.parts)
                        .into_iter()
                        .flat_map(|c| c.modules.iter_mut())
                    {
                        m.ptx_target = None;
                        m.cubin_archs = vec![CudaArch::from_sm(sm)];
                    }
                    *session = SessionState::V6(s);
                }
                writer
                    .write_state(&VgpuState::V1(state))
                    .map_err(|e| e.to_string())?;
            }
            Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            } => writer
                .write_buffer_chunk(session, buffer, offset, data)
                .map_err(|e| e.to_string())?,
            Item::Base { .. } | Item::BaseRef { .. } => {
                return Err("an incremental checkpoint: merge it with its base first".into())
            }
            Item::End(_) => break,
        }
    }
    writer.finish().map_err(|e| e.to_string())?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[1..] {
        ["summary", file] => summary(file),
        ["retarget", input, output, sm] => match sm.parse() {
            Ok(sm) => retarget(input, output, sm),
            Err(_) => Err(format!("invalid SM {sm:?}")),
        },
        _ => Err("usage: ckpt-edit summary FILE | ckpt-edit retarget IN OUT SM".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ckpt-edit: {e}");
            ExitCode::FAILURE
        }
    }
}
