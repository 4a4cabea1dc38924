//! Shared fixtures: a state that uses every type and variant, a buffer
//! content generator, and helpers that write, read, split and re-seal
//! streams.
#![allow(dead_code)]

use std::collections::BTreeMap;

use vgpu_migration::stream::{HEADER_LEN, MAGIC};
use vgpu_migration::*;

pub fn device(name: &str) -> DeviceIdentity {
    DeviceIdentity {
        vendor_id: 0x10de,
        vendor: "NVIDIA Corporation".into(),
        name: name.into(),
        device_version: "OpenCL 3.0 CUDA".into(),
        driver_version: "580.65".into(),
        platform: "NVIDIA CUDA".into(),
    }
}

pub fn profile() -> Profile {
    Profile {
        device_type: 4,
        max_work_group_size: 1024,
        max_work_item_dimensions: 3,
        max_work_item_sizes: vec![1024, 1024, 64],
        local_mem_size: 48 << 10,
        global_mem_size: 80 << 30,
        max_mem_alloc_size: 20 << 30,
        max_constant_buffer_size: 64 << 10,
        max_parameter_size: 4352,
        mem_base_addr_align: 4096,
        extensions: Profile::parse_extensions("cl_khr_fp64 cl_khr_icd"),
        image_support: true,
        address_bits: 64,
        little_endian: true,
        opencl_c_version: Version::new(3, 0),
        fp64: true,
        fp16: false,
        preferred_vector_widths: VectorWidths {
            char: 1,
            short: 1,
            int: 1,
            long: 1,
            float: 1,
            double: 1,
            half: 0,
        },
        native_vector_widths: VectorWidths::default(),
        partition_properties: vec![],
    }
}

fn guest(handle: u64, refs: u32) -> Option<GuestRef> {
    Some(GuestRef { handle, refs })
}

/// A session that uses every object kind and every variant.
pub fn rich_session(id: u64) -> SessionStateV1 {
    let compiled = |src: &str| LinkInput {
        origin: ProgramOrigin::Source(src.as_bytes().to_vec()),
        compile_options: b"-cl-std=CL1.2".to_vec(),
    };
    SessionStateV1 {
        id,
        protocol_version: 1,
        contexts: vec![
            ContextState {
                id: 1,
                guest: guest(1, 2),
                properties: vec![0x1084, 0xdead_beef],
            },
            // Released by the guest, still held by queue 11.
            ContextState {
                id: 2,
                guest: None,
                properties: vec![],
            },
        ],
        queues: vec![
            QueueState {
                id: 10,
                guest: guest(10, 1),
                context: 1,
                properties: vec![0x1093, 2],
            },
            QueueState {
                id: 11,
                guest: guest(11, 3),
                context: 2,
                properties: vec![],
            },
        ],
        buffers: vec![
            BufferState {
                id: 100,
                guest: guest(100, 1),
                context: 1,
                flags: 1,
                size: 3 * 4096 + 17,
                parent: None,
            },
            BufferState {
                id: 101,
                guest: guest(101, 1),
                context: 1,
                flags: 1,
                size: 1024,
                parent: Some(SubRegion {
                    parent: 100,
                    origin: 4096,
                }),
            },
            // Released by the guest, still an argument of kernel 300.
            BufferState {
                id: 102,
                guest: None,
                context: 1,
                flags: 4,
                size: 10,
                parent: None,
            },
        ],
        samplers: vec![SamplerState {
            id: 50,
            guest: guest(50, 1),
            context: 1,
            properties: vec![0x1152, 1, 0x1153, 0x1131, 0x1154, 0x1140],
        }],
        programs: vec![
            ProgramState {
                id: 200,
                guest: guest(200, 1),
                context: 1,
                origin: ProgramOrigin::Source(b"__kernel void k(__global int *a) {}".to_vec()),
                build: ProgramBuild::Built {
                    options: b"-DN=4".to_vec(),
                },
                executable: Some(DeviceBinary {
                    device: device("H200"),
                    bytes: vec![0x7f, b'E', b'L', b'F', 0, 1, 2],
                }),
            },
            ProgramState {
                id: 201,
                guest: guest(201, 1),
                context: 1,
                origin: ProgramOrigin::Il(vec![0x03, 0x02, 0x23, 0x07, 0, 0, 1, 0]),
                build: ProgramBuild::Compiled {
                    options: Vec::new(),
                },
                executable: None,
            },
            ProgramState {
                id: 202,
                guest: guest(202, 1),
                context: 1,
                origin: ProgramOrigin::Binary(DeviceBinary {
                    device: device("H100"),
                    bytes: vec![9; 33],
                }),
                build: ProgramBuild::Failed {
                    options: b"-cl-fast-relaxed-math".to_vec(),
                    compile_only: false,
                },
                executable: None,
            },
            ProgramState {
                id: 203,
                guest: guest(203, 2),
                context: 1,
                origin: ProgramOrigin::Linked(vec![
                    compiled("int f(void) { return 1; }"),
                    LinkInput {
                        origin: ProgramOrigin::Linked(vec![compiled("int g(void) { return 2; }")]),
                        compile_options: Vec::new(),
                    },
                ]),
                build: ProgramBuild::Built {
                    options: b"-create-library".to_vec(),
                },
                executable: None,
            },
            // Released by the guest, still the program of kernel 301.
            ProgramState {
                id: 204,
                guest: None,
                context: 1,
                origin: ProgramOrigin::Source(b"__kernel void h(void) {}".to_vec()),
                build: ProgramBuild::None,
                executable: None,
            },
        ],
        kernels: vec![
            KernelState {
                id: 300,
                guest: guest(300, 1),
                program: 200,
                name: "k".into(),
                args: vec![
                    KernelArg::Unset,
                    KernelArg::Value(vec![1, 2, 3, 4]),
                    KernelArg::Buffer(102),
                    KernelArg::NullBuffer,
                    KernelArg::Local(256),
                    KernelArg::Sampler(50),
                    KernelArg::Buffer(101),
                ],
            },
            KernelState {
                id: 301,
                guest: guest(301, 1),
                program: 204,
                name: "h".into(),
                args: vec![],
            },
        ],
        events: vec![
            EventState {
                id: 400,
                guest: guest(400, 1),
                context: 1,
                kind: EventKind::User { status: 2 },
            },
            EventState {
                id: 401,
                guest: guest(401, 1),
                context: 2,
                kind: EventKind::Command { status: 0 },
            },
        ],
        pending: vec![PendingCommand {
            queue: 10,
            opcode: 0x1037,
            payload: vec![10, 0, 0, 0, 0, 0, 0, 0, 44],
        }],
    }
}

/// A state with two sessions: a rich one and an empty one.
pub fn rich_state() -> VgpuState {
    VgpuStateV1 {
        profile: profile(),
        device: device("H200"),
        sessions: vec![
            rich_session(7).into(),
            SessionStateV1 {
                id: 8,
                protocol_version: 1,
                ..SessionStateV1::default()
            }
            .into(),
        ],
    }
    .into()
}

/// `rich_state` in session state version 6, its first session with a CUDA
/// part too (an allocation and a global, contents keyed apart from the
/// OpenCL buffers').
pub fn parts_state() -> VgpuState {
    let VgpuState::V1(mut state) = rich_state();
    let mut sessions: Vec<SessionStateV6> = state
        .sessions
        .into_iter()
        .map(SessionState::latest)
        .collect();
    let cuda = CudaSessionState {
        contexts: vec![CudaContextState {
            id: 100,
            guest: guest(1, 1),
            flags: 0,
        }],
        allocations: vec![CudaAllocationState {
            id: 100,
            address: 0x2000_0000_0000,
            size: 4096,
        }],
        ..Default::default()
    };
    sessions[0].parts.push(cuda.into());
    sessions[0].contents.push(ContentState {
        key: 1,
        part: 1,
        object: 100,
        size: 4096,
    });
    state.sessions = sessions.into_iter().map(SessionState::V6).collect();
    state.into()
}

/// A state of one session with one buffer per size given (ids 1, 2, ...).
pub fn buffers_state(sizes: &[u64]) -> VgpuState {
    let buffers = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| BufferState {
            id: i as u64 + 1,
            guest: Some(GuestRef {
                handle: i as u64 + 1,
                refs: 1,
            }),
            context: 1,
            flags: 1,
            size,
            parent: None,
        })
        .collect();
    VgpuStateV1 {
        profile: profile(),
        device: device("PoCL"),
        sessions: vec![SessionStateV1 {
            id: 1,
            protocol_version: 1,
            contexts: vec![ContextState {
                id: 1,
                guest: Some(GuestRef { handle: 1, refs: 1 }),
                properties: vec![],
            }],
            buffers,
            ..SessionStateV1::default()
        }
        .into()],
    }
    .into()
}

/// Deterministic contents of a buffer byte.
pub fn content_byte(session: u64, buffer: u64, at: u64) -> u8 {
    let x = session
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(buffer.wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
        .wrapping_add(at.wrapping_mul(0x1656_67b1_9e37_79f9));
    (x >> 29) as u8
}

pub fn content(session: u64, buffer: u64, offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| content_byte(session, buffer, offset + i))
        .collect()
}

/// Writes `state` and every buffer's contents in pieces of `piece` bytes.
pub fn write_stream(state: &VgpuState, piece: usize) -> Vec<u8> {
    let mut w = StreamWriter::new(Vec::new()).expect("writing to memory");
    w.write_state(state).expect("valid state");
    for b in state.streamed_buffers() {
        let mut offset = 0;
        while offset < b.size {
            let len = (b.size - offset).min(piece as u64) as usize;
            let data = content(b.session, b.buffer, offset, len);
            w.write_buffer_chunk(b.session, b.buffer, offset, &data)
                .expect("in order");
            offset += len as u64;
        }
    }
    w.finish().expect("complete").0
}

/// Everything a stream held.
#[derive(Debug)]
pub struct Read {
    pub state: VgpuState,
    pub buffers: BTreeMap<(u64, u64), Vec<u8>>,
    pub summary: Summary,
}

pub fn read_all(bytes: &[u8]) -> Result<Read, ReadError> {
    let mut r = StreamReader::new(bytes)?;
    let mut state = None;
    let mut buffers: BTreeMap<(u64, u64), Vec<u8>> = BTreeMap::new();
    loop {
        match r.next_item()? {
            Some(Item::State(s)) => state = Some(*s),
            Some(Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            }) => {
                let whole = buffers.entry((session, buffer)).or_default();
                assert_eq!(whole.len() as u64, offset, "chunks arrive in order");
                whole.extend_from_slice(data);
            }
            Some(Item::End(summary)) => {
                assert!(r.next_item()?.is_none());
                return Ok(Read {
                    state: state.expect("state before end"),
                    buffers,
                    summary,
                });
            }
            Some(Item::Base { .. } | Item::BaseRef { .. }) => {
                panic!("read_all reads whole checkpoints, not incremental ones")
            }
            None => unreachable!("end comes before none"),
        }
    }
}

/// One chunk of a stream: where it starts, its kind and payload.
#[derive(Debug, Clone)]
pub struct RawChunk {
    pub at: usize,
    pub kind: u32,
    pub payload: Vec<u8>,
}

/// Splits a well-formed stream into its chunks.
pub fn split(bytes: &[u8]) -> Vec<RawChunk> {
    let mut out = Vec::new();
    let mut at = HEADER_LEN as usize;
    while at < bytes.len() {
        let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let len = u64::from_le_bytes(bytes[at + 4..at + 12].try_into().unwrap()) as usize;
        out.push(RawChunk {
            at,
            kind,
            payload: bytes[at + 12..at + 12 + len].to_vec(),
        });
        at += 12 + len + 4;
    }
    out
}

/// Builds a stream from raw chunks with correct checksums, and an end chunk
/// whose totals and stream checksum match (unless the chunks include one).
pub fn seal(version: u32, chunks: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut state_bytes = 0u64;
    let mut buffer_bytes = 0u64;
    for (kind, payload) in chunks {
        push_chunk(&mut out, *kind, payload);
        match kind {
            1 if state_bytes == 0 && payload.len() >= 8 => {
                state_bytes = u64::from_le_bytes(payload[..8].try_into().unwrap())
            }
            2 => buffer_bytes += (payload.len() as u64).saturating_sub(24),
            _ => {}
        }
    }
    if chunks.iter().all(|(kind, _)| *kind != 3) {
        let mut end = (chunks.len() as u64).to_le_bytes().to_vec();
        end.extend_from_slice(&state_bytes.to_le_bytes());
        end.extend_from_slice(&buffer_bytes.to_le_bytes());
        end.extend_from_slice(&crc32fast::hash(&out).to_le_bytes());
        push_chunk(&mut out, 3, &end);
    }
    out
}

pub fn push_chunk(out: &mut Vec<u8>, kind: u32, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The chunks of a stream without its end, for re-sealing.
pub fn body(bytes: &[u8]) -> Vec<(u32, Vec<u8>)> {
    split(bytes)
        .into_iter()
        .filter(|c| c.kind != 3)
        .map(|c| (c.kind, c.payload))
        .collect()
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
