//! A fake vgpu device for in-process tests of the API layer: it accepts
//! every request, answers `GetInfo` from a small table, fills reads with a
//! pattern, and records what it was sent.

use std::sync::{Arc, Mutex};

use opencl_sys::*;
use vgpu_protocol::frame::ReplyBuilder;
use vgpu_protocol::messages::SessionOpened;
use vgpu_protocol::{decode, InfoTarget, Request, Status, Wire};
use vgpu_transport::{Submission, Transport};

/// Byte every read returns.
pub const READ_PATTERN: u8 = 0xab;

/// What the fake device saw.
#[derive(Default)]
pub struct Log {
    /// Batches submitted (round trips).
    pub submits: usize,
    pub requests: Vec<Request>,
    /// Out-data of each submission, concatenated.
    pub out_data: Vec<Vec<u8>>,
}

pub struct FakeDevice {
    pub log: Arc<Mutex<Log>>,
}

fn answer(request: &Request) -> Result<Vec<u8>, Status> {
    let Request::GetInfo(q) = request else {
        return match request {
            // RGBA with UNSIGNED_INT8 or FLOAT.
            Request::GetImageFormats(_) => Ok([CL_UNSIGNED_INT8, CL_FLOAT]
                .iter()
                .flat_map(|t| [CL_RGBA.to_le_bytes(), t.to_le_bytes()].concat())
                .collect()),
            Request::OpenSession(_) => Ok(SessionOpened {
                version: 1,
                max_request_len: 16 << 20,
                max_reply_len: 16 << 20,
                flags: 0,
            }
            .to_bytes()),
            _ => Ok(Vec::new()),
        };
    };
    let target = InfoTarget::from_u32(q.target).ok_or(Status::INVALID_VALUE)?;
    let text = |s: &str| {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        v
    };
    let value = match (target, q.param) {
        (InfoTarget::Platform, CL_PLATFORM_NAME) => text("Fake Platform"),
        (InfoTarget::Device, CL_DEVICE_NAME) => text("Fake CPU"),
        (InfoTarget::Device, CL_DEVICE_TYPE) => CL_DEVICE_TYPE_CPU.to_le_bytes().to_vec(),
        (InfoTarget::Device, CL_DEVICE_MAX_MEM_ALLOC_SIZE) => (1u64 << 20).to_le_bytes().to_vec(),
        (InfoTarget::Device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) => 1024u32.to_le_bytes().to_vec(),
        (InfoTarget::Device, CL_DEVICE_QUEUE_ON_HOST_PROPERTIES) => 3u64.to_le_bytes().to_vec(),
        (InfoTarget::Device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS) => 3u32.to_le_bytes().to_vec(),
        (InfoTarget::Device, CL_DEVICE_MAX_WORK_ITEM_SIZES) => [64u64, 64, 64]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        (InfoTarget::Device, CL_DEVICE_MAX_COMPUTE_UNITS) => 7u32.to_le_bytes().to_vec(),
        (InfoTarget::Device, CL_DEVICE_IMAGE_SUPPORT) => 1u32.to_le_bytes().to_vec(),
        (
            InfoTarget::Device,
            CL_DEVICE_IMAGE2D_MAX_WIDTH
            | CL_DEVICE_IMAGE2D_MAX_HEIGHT
            | CL_DEVICE_IMAGE3D_MAX_WIDTH
            | CL_DEVICE_IMAGE3D_MAX_HEIGHT
            | CL_DEVICE_IMAGE3D_MAX_DEPTH
            | CL_DEVICE_IMAGE_MAX_ARRAY_SIZE
            | CL_DEVICE_IMAGE_MAX_BUFFER_SIZE,
        ) => 1024u64.to_le_bytes().to_vec(),
        (InfoTarget::Device, CL_DEVICE_EXTENSIONS) => {
            text("cl_khr_fp64 cl_khr_gl_sharing cl_khr_icd")
        }
        (InfoTarget::Program, CL_PROGRAM_KERNEL_NAMES) => text("k;other"),
        (InfoTarget::Program, CL_PROGRAM_BINARY_SIZES) => 4u64.to_le_bytes().to_vec(),
        (InfoTarget::Program, CL_PROGRAM_BINARIES) => b"BIN!".to_vec(),
        (InfoTarget::ProgramBuild, CL_PROGRAM_BUILD_OPTIONS) => text("-backend-added"),
        (InfoTarget::Kernel, CL_KERNEL_NUM_ARGS) => 2u32.to_le_bytes().to_vec(),
        (InfoTarget::KernelArg, CL_KERNEL_ARG_ADDRESS_QUALIFIER) => match q.index {
            0 => CL_KERNEL_ARG_ADDRESS_GLOBAL.to_le_bytes().to_vec(),
            _ => CL_KERNEL_ARG_ADDRESS_PRIVATE.to_le_bytes().to_vec(),
        },
        (InfoTarget::KernelWorkGroup, CL_KERNEL_WORK_GROUP_SIZE) => 256u64.to_le_bytes().to_vec(),
        (InfoTarget::KernelWorkGroup, CL_KERNEL_COMPILE_WORK_GROUP_SIZE) => vec![0; 24],
        (InfoTarget::Event, CL_EVENT_COMMAND_EXECUTION_STATUS) => {
            CL_COMPLETE.to_le_bytes().to_vec()
        }
        _ => return Err(Status::INVALID_VALUE),
    };
    Ok(value)
}

impl Transport for FakeDevice {
    fn submit(&mut self, submission: Submission<'_>) -> std::io::Result<usize> {
        let batch = decode(submission.request)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        let mut reply = ReplyBuilder::new(submission.reply.len() as u32);
        let mut log = self.log.lock().unwrap();
        log.submits += 1;
        log.out_data.push(submission.out.concat());
        for message in batch.messages {
            let request = message
                .body
                .expect("the library sends well-formed requests");
            match answer(&request) {
                Ok(payload) => reply.push(message.opcode, message.seq, Status::SUCCESS, &payload),
                Err(status) => reply.push(message.opcode, message.seq, status, &[]),
            }
            log.requests.push(request);
        }
        for buf in submission.in_.iter_mut() {
            buf.fill(READ_PATTERN);
        }
        let bytes = reply.finish();
        submission.reply[..bytes.len()].copy_from_slice(&bytes);
        Ok(bytes.len())
    }

    fn max_data_len(&self) -> usize {
        1 << 20
    }

    fn max_request_len(&self) -> usize {
        16 << 20
    }
}
