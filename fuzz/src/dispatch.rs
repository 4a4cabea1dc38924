//! `backend_dispatch`: request sequences derived from the fuzz input run
//! through `vgpu_backend::harness::InProcess` — the daemon's own decode,
//! dispatch and OpenCL executor on the real device (PoCL here).
//!
//! The input does not spell bytes of the wire format: it picks operations
//! and their fields from small pools (handles 1..=6 of every kind, a few
//! sizes, flags and kernel sources), so creates, uses, releases and reuses
//! of the same objects interleave and the executor is reached with every
//! kind of argument, not just header garbage. A few batches are then
//! corrupted on the wire (a byte changed, truncated) to reach the decoder
//! in context.
//!
//! Program builds are the slow part: only the sources in [`SOURCES`] are
//! ever built, so PoCL's kernel cache answers after the first build.
//!
//! Checks besides "no crash, no hang, no leak": every reply is a
//! well-formed reply stream with one record per message, and no reply
//! payload carries the host's platform or device pointer.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arbitrary::{Result, Unstructured};
use vgpu_backend::executor::opencl::{DeviceSelector, OpenClExecutor};
use vgpu_backend::executor::Executor;
use vgpu_backend::harness::InProcess;
use vgpu_protocol::frame::{BatchBuilder, BATCH_FLAG_STRICT};
use vgpu_protocol::messages::*;
use vgpu_protocol::{decode_reply, opcode, DataRef, ObjectKind, Request, Status};

/// Kernel sources: the only programs ever built. `bump` and `local_copy`
/// touch element 0 of their buffer only (so any buffer of at least one
/// byte is safe: a guest kernel runs in the backend's address space on a
/// CPU device, see SECURITY.md); `broken` does not compile.
pub const SOURCES: &[&str] = &[
    "__kernel void bump(__global uchar *a, uchar v) { if (get_global_id(0) == 0) a[0] += v; }\n\
     __kernel void local_copy(__global uchar *a, __local uchar *s) {\n\
       if (get_local_id(0) == 0) s[0] = 7;\n\
       barrier(CLK_LOCAL_MEM_FENCE);\n\
       if (get_global_id(0) == 0) a[0] = s[0];\n\
     }\n\
     __kernel void nop(void) {}\n",
    "__kernel void broken(__global int *a) { a[0] = ; }\n",
    "int helper(int x) { return x + 1; }\n",
];

const KERNEL_NAMES: &[&[u8]] = &[
    b"bump",
    b"local_copy",
    b"nop",
    b"broken",
    b"helper",
    b"",
    b"no_such_kernel",
    b"bump\0tail",
];

const OPTIONS: &[&[u8]] = &[
    b"",
    b"-cl-fast-relaxed-math",
    b"-D X=1",
    b"-cl-std=CL1.2",
    b"-cl-no-such-option",
    b"-create-library",
    b"-cl-kernel-arg-info",
    b"\xff\xfe",
    b"-D X=1\0-D Y",
];

/// Device-memory sizes: valid small ones, zero, and beyond any device.
const SIZES: &[u64] = &[
    1,
    4,
    16,
    64,
    256,
    4096,
    65536,
    0,
    3,
    1 << 20,
    1 << 40,
    u64::MAX,
    u64::MAX - 3,
];

/// Offsets and lengths within buffers and the chain's data streams.
const OFFSETS: &[u64] = &[
    0,
    1,
    4,
    15,
    16,
    64,
    255,
    256,
    4095,
    4096,
    DATA_LEN as u64 - 1,
    DATA_LEN as u64,
    1 << 32,
    u64::MAX,
    u64::MAX - 15,
];

/// Bytes of out-data (and room for in-data) every batch carries.
pub const DATA_LEN: usize = 64 << 10;

const CL_MEM_FLAGS: &[u64] = &[
    1,       // READ_WRITE
    2,       // WRITE_ONLY
    4,       // READ_ONLY
    8,       // USE_HOST_PTR
    16,      // ALLOC_HOST_PTR
    32,      // COPY_HOST_PTR
    1 << 7,  // HOST_WRITE_ONLY
    1 << 8,  // HOST_READ_ONLY
    1 << 9,  // HOST_NO_ACCESS
    1 << 12, // KERNEL_READ_AND_WRITE
    1 << 31,
];

/// Parameter bases of each `clGet*Info` family; the input adds an offset.
const INFO_PARAMS: &[u32] = &[
    0x0900, 0x1000, 0x1020, 0x1040, 0x1080, 0x1090, 0x1100, 0x1160, 0x1180, 0x1190, 0x11B0, 0x1196,
    0x11D0, 0x1280, 0x4000,
];

/// The shared executor and the bytes of its host platform and device ids.
pub(crate) type Shared = (Arc<dyn Executor>, [u8; 8], [u8; 8]);

/// The executor every run shares (opening a device is slow); `None`
/// without an OpenCL device.
pub(crate) fn executor() -> Option<Shared> {
    static EXECUTOR: OnceLock<Option<Shared>> = OnceLock::new();
    EXECUTOR
        .get_or_init(|| {
            let device = OpenClExecutor::open(&DeviceSelector::First).ok()?;
            let platform = (device.platform as usize as u64).to_le_bytes();
            let id = (device.device as usize as u64).to_le_bytes();
            Some((Arc::new(device) as Arc<dyn Executor>, platform, id))
        })
        .clone()
}

/// `VGPU_FUZZ_TRACE=1`: print every reply's statuses (to see how deep
/// an input gets).
pub(crate) fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("VGPU_FUZZ_TRACE").is_some_and(|v| v == "1"))
}

/// Whether this host can run the target at all.
pub fn available() -> bool {
    executor().is_some()
}

/// What the generator remembers between operations.
#[derive(Default)]
pub(crate) struct Model {
    /// User-event handles whose status may still be unset: set before
    /// any call that blocks, as a sane guest would, so the run never
    /// waits forever on itself (that wait is the guest's own, and
    /// `faults.rs` tests that closing the session ends it).
    pending_user_events: BTreeSet<u64>,
    /// The last program binary a `GetInfo` returned, fed back mutated.
    binary: Option<Vec<u8>>,
}

/// Mostly 1..=3, so objects meet; 4..=6 less often; now and then none
/// or a wild value.
fn handle(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=31)? {
        0 => 0,
        1 => u64::MAX,
        2 => u.arbitrary()?,
        n @ 3..=8 => u64::from(n - 2),
        n => u64::from(n % 3) + 1,
    })
}

fn handles(u: &mut Unstructured<'_>) -> Result<Vec<u64>> {
    let n = match u.int_in_range(0u8..=15)? {
        0..=7 => 0,
        8..=12 => 1,
        13 | 14 => 2,
        _ => 4,
    };
    (0..n).map(|_| handle(u)).collect()
}

fn pick<T: Copy>(u: &mut Unstructured<'_>, pool: &[T]) -> Result<T> {
    Ok(*u.choose(pool)?)
}

fn size(u: &mut Unstructured<'_>) -> Result<u64> {
    pick(u, SIZES)
}

fn offset(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 | 1 => 0,
        2 => pick(u, OFFSETS)?,
        _ => u64::from(u.int_in_range(0u16..=300)?),
    })
}

fn data_ref(u: &mut Unstructured<'_>) -> Result<DataRef> {
    Ok(DataRef {
        offset: offset(u)?,
        len: match u.int_in_range(0u8..=3)? {
            0 => pick(u, OFFSETS)?,
            _ => pick(u, &[1, 4, 16, 64, 256, 4096])?,
        },
    })
}

fn triple(u: &mut Unstructured<'_>, pool: &[u64]) -> Result<[u64; 3]> {
    Ok([pick(u, pool)?, pick(u, pool)?, pick(u, pool)?])
}

fn mem_flags(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=7)? {
        0..=3 => 1,
        4 | 5 => pick(u, CL_MEM_FLAGS)?,
        6 => pick(u, CL_MEM_FLAGS)? | pick(u, CL_MEM_FLAGS)?,
        _ => u.arbitrary()?,
    })
}

fn bytes(u: &mut Unstructured<'_>, max: usize) -> Result<Vec<u8>> {
    let len = u.int_in_range(0..=max)?;
    Ok(u.bytes(len)?.to_vec())
}

fn context_properties(u: &mut Unstructured<'_>) -> Result<Vec<u64>> {
    Ok(match u.int_in_range(0u8..=7)? {
        0..=3 => vec![],
        4 => vec![0x1084, u.arbitrary()?, 0],
        5 => vec![0x1085, 1, 0],
        6 => vec![u64::from(u.arbitrary::<u16>()?), u.arbitrary()?],
        _ => vec![0x1084],
    })
}

fn queue_properties(u: &mut Unstructured<'_>) -> Result<Vec<u64>> {
    Ok(match u.int_in_range(0u8..=9)? {
        0..=4 => vec![],
        5 => vec![0x1093, 2, 0],                 // PROFILING_ENABLE
        6 => vec![0x1093, 1],                    // OUT_OF_ORDER
        7 => vec![0x1093, 4 | 1, 0x1094, 16, 0], // ON_DEVICE
        8 => vec![0x1093, u.arbitrary()?],
        _ => vec![u64::from(u.arbitrary::<u16>()?), u.arbitrary()?, 0],
    })
}

fn kernel_arg(u: &mut Unstructured<'_>) -> Result<SetKernelArg> {
    let arg_kind = match u.int_in_range(0u8..=15)? {
        0..=5 => 1,  // Value
        6..=10 => 2, // Mem
        11 | 12 => 3,
        13 => 4,
        14 => 5,
        _ => u.int_in_range(0..=7)?,
    };
    let value_len = pick(u, &[0usize, 1, 1, 1, 4, 8, 8, 16])?;
    let value = u.bytes(value_len.min(u.len()))?.to_vec();
    let size = match u.int_in_range(0u8..=3)? {
        0 | 1 => value.len() as u64,
        2 => pick(u, &[0u64, 1, 8, 1 << 20, u64::MAX])?,
        _ => u64::from(u.int_in_range(0u16..=4096)?),
    };
    Ok(SetKernelArg {
        kernel: handle(u)?,
        index: match u.int_in_range(0u8..=7)? {
            0..=6 => u32::from(u.int_in_range(0u8..=2)?),
            _ => u.arbitrary()?,
        },
        arg_kind,
        size,
        value,
        handle: handle(u)?,
    })
}

fn binary(u: &mut Unstructured<'_>, model: &Model) -> Result<Vec<u8>> {
    Ok(match (u.int_in_range(0u8..=3)?, &model.binary) {
        (0, _) => Vec::new(),
        (1, Some(binary)) => binary.clone(),
        (2, Some(binary)) => {
            let mut binary = binary.clone();
            for _ in 0..u.int_in_range(1u8..=4)? {
                if binary.is_empty() {
                    break;
                }
                let at = u.int_in_range(0..=binary.len() - 1)?;
                match u.int_in_range(0u8..=2)? {
                    0 => binary[at] = u.arbitrary()?,
                    1 => binary.truncate(at),
                    _ => binary[at..].iter_mut().take(8).for_each(|b| *b = 0xff),
                }
            }
            binary
        }
        _ => bytes(u, 64)?,
    })
}

fn get_info(u: &mut Unstructured<'_>) -> Result<GetInfo> {
    let param = match u.int_in_range(0u8..=7)? {
        0 => u.arbitrary()?,
        1 => 0x1166, // PROGRAM_BINARIES: captured for CreateProgramWithBinary
        _ => pick(u, INFO_PARAMS)? + u32::from(u.int_in_range(0u8..=0x30)?),
    };
    Ok(GetInfo {
        target: u.int_in_range(0..=13)?,
        handle: handle(u)?,
        index: u.int_in_range(0..=3)?,
        param,
    })
}

/// One operation; `None` when the input ran out.
pub(crate) fn operation(u: &mut Unstructured<'_>, model: &Model) -> Result<Request> {
    let wait = |u: &mut Unstructured<'_>| handles(u);
    let event = |u: &mut Unstructured<'_>| -> Result<u64> {
        Ok(if u.ratio(1u8, 2)? { 0 } else { handle(u)? })
    };
    Ok(match u.int_in_range(0u8..=46)? {
        0 | 1 => CreateContext {
            context: handle(u)?,
            properties: context_properties(u)?,
        }
        .into(),
        2 | 3 => CreateQueue {
            queue: handle(u)?,
            context: handle(u)?,
            properties: queue_properties(u)?,
        }
        .into(),
        4..=6 => {
            let size = size(u)?;
            CreateBuffer {
                mem: handle(u)?,
                context: handle(u)?,
                flags: mem_flags(u)?,
                size,
                init: match u.int_in_range(0u8..=3)? {
                    0 => DataRef {
                        offset: offset(u)?,
                        len: size,
                    },
                    1 => data_ref(u)?,
                    _ => DataRef::NONE,
                },
            }
            .into()
        }
        7 | 8 => CreateSubBuffer {
            mem: handle(u)?,
            parent: handle(u)?,
            flags: mem_flags(u)?,
            origin: offset(u)?,
            size: size(u)?,
        }
        .into(),
        9 | 10 => CreateProgramWithSource {
            program: handle(u)?,
            context: handle(u)?,
            source: match u.int_in_range(0u8..=15)? {
                0 => bytes(u, 16)?,
                n => SOURCES[usize::from(n) % SOURCES.len()].as_bytes().to_vec(),
            },
        }
        .into(),
        11 => CreateProgramWithBinary {
            program: handle(u)?,
            context: handle(u)?,
            binary: binary(u, model)?,
        }
        .into(),
        12 => CreateProgramWithIl {
            program: handle(u)?,
            context: handle(u)?,
            il: bytes(u, 32)?,
        }
        .into(),
        13 | 14 => BuildProgram {
            program: handle(u)?,
            options: pick(u, OPTIONS)?.to_vec(),
        }
        .into(),
        15 => CompileProgram {
            program: handle(u)?,
            options: pick(u, OPTIONS)?.to_vec(),
        }
        .into(),
        16 => LinkProgram {
            program: handle(u)?,
            context: handle(u)?,
            options: pick(u, OPTIONS)?.to_vec(),
            inputs: handles(u)?,
        }
        .into(),
        17 | 18 => CreateKernel {
            kernel: handle(u)?,
            program: handle(u)?,
            name: pick(u, KERNEL_NAMES)?.to_vec(),
        }
        .into(),
        19 => CloneKernel {
            kernel: handle(u)?,
            source: handle(u)?,
        }
        .into(),
        20 => CreateUserEvent {
            event: handle(u)?,
            context: handle(u)?,
        }
        .into(),
        21 => Retain {
            kind: u.int_in_range(0..=8)?,
            handle: handle(u)?,
        }
        .into(),
        22 | 23 => Release {
            kind: u.int_in_range(0..=8)?,
            handle: handle(u)?,
        }
        .into(),
        24..=26 => kernel_arg(u)?.into(),
        27 => SetUserEventStatus {
            event: handle(u)?,
            status: pick(u, &[0, 0, -5, -1, 1, 3, i32::MIN])?,
        }
        .into(),
        28 => InitBuffer {
            mem: handle(u)?,
            offset: offset(u)?,
            data: data_ref(u)?,
        }
        .into(),
        29 => EnqueueWriteBuffer {
            queue: handle(u)?,
            mem: handle(u)?,
            offset: offset(u)?,
            data: data_ref(u)?,
            wait: wait(u)?,
            event: event(u)?,
        }
        .into(),
        30 => EnqueueReadBuffer {
            queue: handle(u)?,
            mem: handle(u)?,
            offset: offset(u)?,
            data: data_ref(u)?,
            wait: wait(u)?,
            event: event(u)?,
        }
        .into(),
        31 => EnqueueCopyBuffer {
            queue: handle(u)?,
            src: handle(u)?,
            dst: handle(u)?,
            src_offset: offset(u)?,
            dst_offset: offset(u)?,
            size: pick(u, &[1, 4, 16, 64, 256, 0, 4096, u64::MAX])?,
            wait: wait(u)?,
            event: event(u)?,
        }
        .into(),
        32 => EnqueueFillBuffer {
            queue: handle(u)?,
            mem: handle(u)?,
            pattern: {
                let len = pick(u, &[1usize, 2, 4, 8, 16, 128, 0, 3, 256])?;
                vec![0xa5; len]
            },
            offset: offset(u)?,
            size: pick(u, &[1, 4, 16, 64, 256, 0, 3, 4096, u64::MAX])?,
            wait: wait(u)?,
            event: event(u)?,
        }
        .into(),
        33..=35 => {
            const GEOMETRY: &[u64] = &[0, 1, 2, 4, 8, 16, 3, 1 << 33, u64::MAX];
            let (queue, mem) = (handle(u)?, handle(u)?);
            let buffer_origin = triple(u, GEOMETRY)?;
            let host_origin = triple(u, GEOMETRY)?;
            let region = triple(u, GEOMETRY)?;
            let pitches = [
                pick(u, GEOMETRY)?,
                pick(u, GEOMETRY)?,
                pick(u, GEOMETRY)?,
                pick(u, GEOMETRY)?,
            ];
            let (wait, event) = (wait(u)?, event(u)?);
            match u.int_in_range(0u8..=2)? {
                0 => EnqueueWriteBufferRect {
                    queue,
                    mem,
                    buffer_origin,
                    host_origin,
                    region,
                    buffer_row_pitch: pitches[0],
                    buffer_slice_pitch: pitches[1],
                    host_row_pitch: pitches[2],
                    host_slice_pitch: pitches[3],
                    data: data_ref(u)?,
                    wait,
                    event,
                }
                .into(),
                1 => EnqueueReadBufferRect {
                    queue,
                    mem,
                    buffer_origin,
                    host_origin,
                    region,
                    buffer_row_pitch: pitches[0],
                    buffer_slice_pitch: pitches[1],
                    host_row_pitch: pitches[2],
                    host_slice_pitch: pitches[3],
                    data: data_ref(u)?,
                    wait,
                    event,
                }
                .into(),
                _ => EnqueueCopyBufferRect {
                    queue,
                    src: mem,
                    dst: handle(u)?,
                    src_origin: buffer_origin,
                    dst_origin: host_origin,
                    region,
                    src_row_pitch: pitches[0],
                    src_slice_pitch: pitches[1],
                    dst_row_pitch: pitches[2],
                    dst_slice_pitch: pitches[3],
                    wait,
                    event,
                }
                .into(),
            }
        }
        36..=38 => {
            // Small launches only: the device's time is not what is tested.
            const GLOBAL: &[u64] = &[1, 2, 3, 4, 16, 64, 0];
            const LOCAL: &[u64] = &[0, 0, 1, 2, 4, 3, 64, 4096, 1 << 20];
            const OFFSET: &[u64] = &[0, 0, 0, 1, 1 << 40, u64::MAX];
            EnqueueNdRange {
                queue: handle(u)?,
                kernel: handle(u)?,
                work_dim: pick(u, &[1, 1, 1, 2, 3, 0, 4])?,
                offset: triple(u, OFFSET)?,
                global: triple(u, GLOBAL)?,
                local: triple(u, LOCAL)?,
                wait: wait(u)?,
                event: event(u)?,
            }
            .into()
        }
        39 => EnqueueMarker {
            queue: handle(u)?,
            wait: wait(u)?,
            event: event(u)?,
        }
        .into(),
        40 => EnqueueBarrier {
            queue: handle(u)?,
            wait: wait(u)?,
            event: event(u)?,
        }
        .into(),
        41 => match u.int_in_range(0u8..=2)? {
            0 => Flush { queue: handle(u)? }.into(),
            1 => Finish { queue: handle(u)? }.into(),
            _ => WaitForEvents {
                events: handles(u)?,
            }
            .into(),
        },
        42 | 43 => get_info(u)?.into(),
        44 | 45 => {
            let (wait, event) = (wait(u)?, event(u)?);
            image_operation(u, wait, event)?
        }
        _ => match u.int_in_range(0u8..=8)? {
            0 => SessionStats {}.into(),
            1 => Ping {}.into(),
            2 => OpenSession {
                min_version: 1,
                max_version: 1,
                flags: 0,
            }
            .into(),
            // CUDA calls on a host that serves only OpenCL.
            3 => CuMemAlloc {
                ctx: handle(u)?,
                size: size(u)?,
            }
            .into(),
            4 => CuCtxCreate {
                ctx: handle(u)?,
                device: 0,
                flags: 0,
            }
            .into(),
            5 => Retain {
                kind: ObjectKind::Sampler as u32,
                handle: handle(u)?,
            }
            .into(),
            // Partitions real, absurd and malformed, of the root device
            // or of a (maybe forged) sub-device.
            6 => CreateSubDevices {
                parent: pick(u, &[0, 1, 2, u64::MAX])?,
                properties: pick(
                    u,
                    &[
                        &[0x1086, 1, 0][..],
                        &[0x1087, 1, 1, 0, 0][..],
                        &[0x1086, 1 << 31, 0][..],
                        &[0x1087, u64::MAX, 2, 0, 0][..],
                        &[0x1088, 1, 0][..],
                        &[0x1086][..],
                        &[][..],
                    ],
                )?
                .to_vec(),
                devices: handles(u)?,
            }
            .into(),
            7 => CreateContextOnDevices {
                context: handle(u)?,
                properties: vec![],
                devices: handles(u)?,
            }
            .into(),
            _ => CreateQueueOnDevice {
                queue: handle(u)?,
                context: handle(u)?,
                device: handle(u)?,
                properties: vec![],
            }
            .into(),
        },
    })
}

/// Image and sampler calls: real formats and small images mostly, hostile
/// geometry (origins and regions near the limits) often.
fn image_operation(u: &mut Unstructured<'_>, wait: Vec<u64>, event: u64) -> Result<Request> {
    // RGBA FLOAT, R UINT8, RGB 565, an unknown order.
    let (order, data_type) = pick(
        u,
        &[
            (0x10B5, 0x10DE),
            (0x10B0, 0x10DA),
            (0x10B4, 0x10D4),
            (0x1234, 0x10DE),
        ],
    )?;
    let geometry = [0, 1, 2, 3, 16, 4096, u64::MAX / 2, u64::MAX];
    Ok(match u.int_in_range(0u8..=9)? {
        0 | 1 => CreateImage {
            mem: handle(u)?,
            context: handle(u)?,
            flags: mem_flags(u)?,
            channel_order: order,
            channel_type: data_type,
            image_type: pick(u, &[0x10F1, 0x10F2, 0x10F3, 0x10F4, 0x10F5, 0x10F6, 0x10F0])?,
            dims: triple(u, &[0, 1, 4, 16, 1 << 20, u64::MAX])?,
            array_size: pick(u, &[0, 1, 3, u64::MAX])?,
            buffer: if u.ratio(1u8, 4)? { handle(u)? } else { 0 },
        }
        .into(),
        2 => InitImage {
            mem: handle(u)?,
            origin: triple(u, &geometry)?,
            region: triple(u, &geometry)?,
            data: data_ref(u)?,
        }
        .into(),
        3 => EnqueueWriteImage {
            queue: handle(u)?,
            mem: handle(u)?,
            origin: triple(u, &geometry)?,
            region: triple(u, &geometry)?,
            data: data_ref(u)?,
            wait,
            event,
        }
        .into(),
        4 => EnqueueReadImage {
            queue: handle(u)?,
            mem: handle(u)?,
            origin: triple(u, &geometry)?,
            region: triple(u, &geometry)?,
            data: data_ref(u)?,
            wait,
            event,
        }
        .into(),
        5 => EnqueueCopyImage {
            queue: handle(u)?,
            src: handle(u)?,
            dst: handle(u)?,
            src_origin: triple(u, &geometry)?,
            dst_origin: triple(u, &geometry)?,
            region: triple(u, &geometry)?,
            wait,
            event,
        }
        .into(),
        6 => EnqueueCopyImageToBuffer {
            queue: handle(u)?,
            src: handle(u)?,
            dst: handle(u)?,
            src_origin: triple(u, &geometry)?,
            region: triple(u, &geometry)?,
            dst_offset: offset(u)?,
            wait,
            event,
        }
        .into(),
        7 => EnqueueCopyBufferToImage {
            queue: handle(u)?,
            src: handle(u)?,
            dst: handle(u)?,
            src_offset: offset(u)?,
            dst_origin: triple(u, &geometry)?,
            region: triple(u, &geometry)?,
            wait,
            event,
        }
        .into(),
        8 => EnqueueFillImage {
            queue: handle(u)?,
            mem: handle(u)?,
            color: bytes(u, 20)?,
            origin: triple(u, &geometry)?,
            region: triple(u, &geometry)?,
            wait,
            event,
        }
        .into(),
        _ => match u.int_in_range(0u8..=1)? {
            0 => CreateSampler {
                sampler: handle(u)?,
                context: handle(u)?,
                properties: pick(
                    u,
                    &[
                        &[][..],
                        &[0x1152, 0, 0x1153, 0x1131, 0x1154, 0x1141][..],
                        &[0x1234, 1][..],
                        &[0x1152][..],
                    ],
                )?
                .to_vec(),
            }
            .into(),
            _ => GetImageFormats {
                context: handle(u)?,
                flags: mem_flags(u)?,
                image_type: pick(u, &[0x10F1, 0x10F2, 0, u32::MAX])?,
            }
            .into(),
        },
    })
}

/// Whether a call may block until a user event is set.
fn may_block(request: &Request) -> bool {
    match request {
        Request::CreateBuffer(m) => m.init.len > 0,
        Request::Release(m) => m.kind == ObjectKind::Event as u32,
        _ => matches!(
            request.opcode(),
            opcode::Finish
                | opcode::WaitForEvents
                | opcode::InitBuffer
                | opcode::EnqueueReadBuffer
                | opcode::EnqueueWriteBuffer
                | opcode::EnqueueReadBufferRect
                | opcode::EnqueueWriteBufferRect
                | opcode::InitImage
                | opcode::EnqueueReadImage
                | opcode::EnqueueWriteImage
        ),
    }
}

/// One batch of the input's operations, encoded.
fn batch(u: &mut Unstructured<'_>, model: &Model) -> Result<Vec<u8>> {
    let count = u.int_in_range(1u8..=24)?;
    let mut requests = Vec::with_capacity(usize::from(count));
    let mut pending = model.pending_user_events.clone();
    for _ in 0..count {
        let request = operation(u, model)?;
        if may_block(&request) {
            for event in std::mem::take(&mut pending) {
                requests.push(SetUserEventStatus { event, status: 0 }.into());
            }
        }
        if let Request::CreateUserEvent(m) = &request {
            pending.insert(m.event);
        }
        requests.push(request);
    }
    // (An exhausted input answers every ratio with "yes": only choose these
    // while the input lasts.)
    let flags = if !u.is_empty() && u.ratio(1u8, 16)? {
        BATCH_FLAG_STRICT
    } else {
        0
    };
    let reply_capacity = if !u.is_empty() && u.ratio(1u8, 16)? {
        u.int_in_range(24u32..=300)?
    } else {
        1 << 20
    };
    let mut bytes = encode(flags, &requests, reply_capacity);
    // Now and then the wire bytes themselves are damaged.
    if !u.is_empty() && u.ratio(1u8, 24)? {
        let at = u.int_in_range(0..=bytes.len() - 1)?;
        match u.int_in_range(0u8..=2)? {
            0 => bytes[at] = u.arbitrary()?,
            1 => bytes.truncate(at),
            _ => bytes[at] ^= 0x80,
        }
    }
    Ok(bytes)
}

/// A request stream of `requests` for session 1.
pub fn encode(flags: u16, requests: &[Request], reply_capacity: u32) -> Vec<u8> {
    let mut builder = BatchBuilder::new(flags);
    for (seq, request) in requests.iter().enumerate() {
        builder.push(seq as u64 + 1, request);
    }
    builder.finish(1, reply_capacity)
}

/// The statuses of a call that named an object the session does not have.
pub(crate) const UNKNOWN_OBJECT: &[Status] = &[
    Status::INVALID_CONTEXT,
    Status::INVALID_COMMAND_QUEUE,
    Status::INVALID_MEM_OBJECT,
    Status::INVALID_SAMPLER,
    Status::INVALID_PROGRAM,
    Status::INVALID_KERNEL,
    Status::INVALID_EVENT_WAIT_LIST,
    Status::INVALID_EVENT,
];

/// Calls refused for naming an unknown object (never created, released,
/// of another kind, or a wild value), over every run of this process.
static UNKNOWN_HANDLES: AtomicU64 = AtomicU64::new(0);

/// See [`UNKNOWN_HANDLES`].
pub fn unknown_handles_refused() -> u64 {
    UNKNOWN_HANDLES.load(Ordering::Relaxed)
}

/// One session in the harness, with the checks every reply goes through.
struct Run {
    harness: InProcess,
    model: Model,
    out_data: Vec<u8>,
    host_ids: [[u8; 8]; 2],
}

impl Run {
    /// Runs a request stream unless it would wait forever on a user event
    /// it creates itself (the guest's own deadlock, not the backend's);
    /// user events of earlier batches are set first where needed.
    fn batch(&mut self, bytes: &[u8]) {
        let messages = vgpu_protocol::decode(bytes)
            .map(|b| b.messages)
            .unwrap_or_default();
        let mut created_here = BTreeSet::new();
        let mut set_here = BTreeSet::new();
        let mut set_before_block = BTreeSet::new();
        let mut blocks = false;
        for message in &messages {
            match &message.body {
                Ok(Request::CreateUserEvent(m)) => {
                    created_here.insert(m.event);
                }
                // Only CL_COMPLETE or an error sets a user event; a set
                // that comes after the first blocking call is too late
                // for it.
                Ok(Request::SetUserEventStatus(m)) if m.status <= 0 => {
                    created_here.remove(&m.event);
                    if !blocks {
                        set_before_block.insert(m.event);
                    }
                    set_here.insert(m.event);
                }
                Ok(request) if may_block(request) => {
                    if !created_here.is_empty() {
                        return;
                    }
                    blocks = true;
                }
                _ => {}
            }
        }
        if blocks {
            let sets: Vec<Request> = std::mem::take(&mut self.model.pending_user_events)
                .into_iter()
                .filter(|e| !set_before_block.contains(e))
                .map(|event| SetUserEventStatus { event, status: 0 }.into())
                .collect();
            if !sets.is_empty() {
                let bytes = encode(0, &sets, 1 << 20);
                self.run(&bytes, &sets);
            }
        }
        self.model
            .pending_user_events
            .retain(|e| !set_here.contains(e));
        self.model.pending_user_events.extend(created_here);
        let requests: Vec<Request> = messages.into_iter().filter_map(|m| m.body.ok()).collect();
        self.run(bytes, &requests);
    }

    fn run(&mut self, bytes: &[u8], requests: &[Request]) {
        if trace() {
            eprintln!("running {} bytes:", bytes.len());
            for request in requests {
                eprintln!("  {request:?}");
            }
        }
        let (reply, _in_data) = self.harness.run(bytes, &self.out_data, DATA_LEN);
        let reply = decode_reply(&reply).expect("the backend wrote a malformed reply stream");
        if trace() {
            eprintln!("batch: {:?}", reply.status);
            for (i, record) in reply.records.iter().enumerate() {
                let name = requests.get(i).map_or("?", |r| r.name());
                eprintln!("  {name}: {:?}", record.status);
            }
        }
        if !reply.status.is_success() {
            return;
        }
        if let Ok(batch) = vgpu_protocol::decode(bytes) {
            if !reply.truncated {
                assert_eq!(
                    reply.records.len(),
                    batch.messages.len(),
                    "a message got no record"
                );
            }
        }
        let unknown = reply
            .records
            .iter()
            .filter(|r| UNKNOWN_OBJECT.contains(&r.status))
            .count();
        UNKNOWN_HANDLES.fetch_add(unknown as u64, Ordering::Relaxed);
        for record in &reply.records {
            for id in &self.host_ids {
                assert!(
                    !record.payload.windows(8).any(|w| w == id),
                    "a reply to {:#x} carries a host pointer",
                    record.opcode
                );
            }
        }
        // Capture a program binary for CreateProgramWithBinary. Records
        // and decoded requests line up when every message decoded.
        if requests.len() == reply.records.len() {
            for (request, record) in requests.iter().zip(&reply.records) {
                if let Request::GetInfo(m) = request {
                    if m.param == 0x1166 && record.status.is_success() && !record.payload.is_empty()
                    {
                        self.model.binary = Some(record.payload.clone());
                    }
                }
            }
        }
    }

    /// Sets every user event still pending, so the session ends cleanly.
    fn finish(mut self) {
        let sets: Vec<Request> = std::mem::take(&mut self.model.pending_user_events)
            .into_iter()
            .map(|event| SetUserEventStatus { event, status: 0 }.into())
            .collect();
        if !sets.is_empty() {
            let bytes = encode(0, &sets, 1 << 20);
            self.run(&bytes, &sets);
        }
    }
}

/// Input mode (first byte, low bit): operations chosen by the input.
pub const MODE_STRUCTURED: u8 = 0;
/// Input mode: raw request streams, each `u16 length` + bytes; the batch
/// header's `request_len` is fixed up to the length so mutations reach
/// the message decoder and the executor.
pub const MODE_RAW: u8 = 1;

/// The whole target: up to eight batches from `data` in one fresh session.
pub fn backend_dispatch(data: &[u8]) {
    let Some((executor, platform, device)) = executor() else {
        return;
    };
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let mut run = Run {
        harness: InProcess::new(&[executor]),
        model: Model::default(),
        out_data: (0..DATA_LEN).map(|i| (i * 7 + 3) as u8).collect(),
        host_ids: [platform, device],
    };
    if mode & 1 == MODE_RAW {
        let mut rest = data;
        for _ in 0..8 {
            let Some((len, tail)) = rest.split_first_chunk::<2>() else {
                break;
            };
            let len = usize::from(u16::from_le_bytes(*len)).min(tail.len());
            let mut bytes = tail[..len].to_vec();
            rest = &tail[len..];
            if bytes.len() >= 24 {
                bytes[20..24].copy_from_slice(&(len as u32).to_le_bytes());
            }
            run.batch(&bytes);
        }
    } else {
        let mut u = Unstructured::new(data);
        for _ in 0..8 {
            if u.is_empty() {
                break;
            }
            let Ok(bytes) = batch(&mut u, &run.model) else {
                break;
            };
            run.batch(&bytes);
        }
    }
    run.finish();
}

/// A raw-mode input: the request streams of `batches`.
pub fn raw_input(batches: &[Vec<Request>]) -> Vec<u8> {
    let mut out = vec![MODE_RAW];
    for requests in batches {
        let bytes = encode(0, requests, 1 << 20);
        out.extend_from_slice(
            &u16::try_from(bytes.len())
                .expect("seed batches are small")
                .to_le_bytes(),
        );
        out.extend_from_slice(&bytes);
    }
    out
}
