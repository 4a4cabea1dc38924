//! Each executor's own part of a session, in a type that executor owns.
//!
//! A session is stored as a list of parts, one per executor that holds
//! objects of it (`SessionStateV6::parts`). Each part is tagged with its
//! executor's kind and carries that executor's own versioned state
//! (`OpenClState`, `CudaState`): an executor changes its state by adding a
//! version of its own type, with an upgrade here, and nothing above the
//! executors needs to know. The vGPU layer only pairs a part with the
//! executor of the same kind and sums what `usage` reports.

use std::fmt;

use super::cuda::{CudaSessionState, CudaSessionStateV1};
use super::image::ImageState;
use super::kernel::KernelState;
use super::objects::{
    BufferState, ContextState, EventState, ObjectId, PendingCommand, QueueState, SamplerState,
};
use super::program::ProgramState;
use super::subdevice::DeviceTopology;
use crate::codec::{record, Codec, DecodeError, Decoder, Encoder, Result};

/// Which executor a part of a session belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutorKind {
    OpenCl,
    Cuda,
}

impl fmt::Display for ExecutorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExecutorKind::OpenCl => "OpenCL",
            ExecutorKind::Cuda => "CUDA",
        })
    }
}

/// The newest version of `OpenClState` this build writes.
pub const OPENCL_STATE_VERSION: u32 = 1;
/// The newest version of `CudaState` this build writes.
pub const CUDA_STATE_VERSION: u32 = 2;

/// One executor's part of a session, as stored.
// A session holds one or two parts, built and moved once per save.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorState {
    OpenCl(OpenClState),
    Cuda(CudaState),
}

/// The OpenCL executor's objects of one session, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenClState {
    V1(OpenClStateV1),
}

record! {
    /// A session's OpenCL objects: what session states 1 to 5 held apart
    /// (objects, images, sub-devices), in one record.
    #[derive(Default)]
    pub struct OpenClStateV1 {
        pub contexts: Vec<ContextState>,
        pub queues: Vec<QueueState>,
        /// Parents before their sub-buffers.
        pub buffers: Vec<BufferState>,
        pub samplers: Vec<SamplerState>,
        pub programs: Vec<ProgramState>,
        pub kernels: Vec<KernelState>,
        pub events: Vec<EventState>,
        /// Commands not yet run, in the order they were enqueued.
        pub pending: Vec<PendingCommand>,
        pub images: Vec<ImageState>,
        pub devices: DeviceTopology,
    }
}

/// The CUDA executor's objects of one session, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaState {
    /// Version 2; version 1 (no context limits) is upgraded as it is read.
    V2(CudaSessionState),
}

/// What a part holds against a VM's quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Bytes of device memory its objects take.
    pub bytes: u64,
    /// Objects the guest holds handles to.
    pub objects: u64,
}

impl OpenClState {
    /// The newest version, upgraded from whichever this one is.
    pub fn latest(self) -> OpenClStateV1 {
        match self {
            OpenClState::V1(state) => state,
        }
    }

    pub fn newest(&self) -> &OpenClStateV1 {
        match self {
            OpenClState::V1(state) => state,
        }
    }

    pub fn version(&self) -> u32 {
        match self {
            OpenClState::V1(_) => 1,
        }
    }
}

impl CudaState {
    /// The newest version, upgraded from whichever this one is.
    pub fn latest(self) -> CudaSessionState {
        match self {
            CudaState::V2(state) => state,
        }
    }

    pub fn newest(&self) -> &CudaSessionState {
        match self {
            CudaState::V2(state) => state,
        }
    }

    pub fn version(&self) -> u32 {
        match self {
            CudaState::V2(_) => 2,
        }
    }
}

impl OpenClStateV1 {
    /// Whether the part holds anything (an empty one is not stored).
    pub fn is_empty(&self) -> bool {
        *self == OpenClStateV1::default()
    }

    /// Objects whose contents a stream carries, as (id, size): top-level
    /// buffers, then images with storage of their own.
    pub fn streamed(&self) -> impl Iterator<Item = (ObjectId, u64)> + '_ {
        let buffers = self.buffers.iter().filter(|b| b.parent.is_none());
        buffers.map(|b| (b.id, b.size)).chain(
            self.images
                .iter()
                .filter(|i| i.buffer.is_none())
                .map(|i| (i.id, i.size)),
        )
    }

    fn usage(&self) -> Usage {
        let held = |n: usize| n as u64;
        macro_rules! held {
            ($($list:expr),*) => { 0u64 $(+ held($list.iter().filter(|o| o.guest.is_some()).count()))* };
        }
        Usage {
            // Images count whole, on their buffer too, as their creation did.
            bytes: self
                .buffers
                .iter()
                .filter(|b| b.parent.is_none())
                .map(|b| b.size)
                .chain(self.images.iter().map(|i| i.size))
                .fold(0, u64::saturating_add),
            objects: held!(
                self.contexts,
                self.queues,
                self.buffers,
                self.programs,
                self.kernels,
                self.events,
                self.images,
                self.devices.sub_devices
            ),
        }
    }
}

fn cuda_usage(c: &CudaSessionState) -> Usage {
    let held = |n: usize| n as u64;
    macro_rules! held {
        ($($list:expr),*) => { 0u64 $(+ held($list.iter().filter(|o| o.guest.is_some()).count()))* };
    }
    Usage {
        bytes: c
            .allocations
            .iter()
            .map(|a| a.size)
            .chain(c.limits.iter().map(|l| l.charged))
            .fold(0, u64::saturating_add),
        objects: held!(c.contexts, c.modules, c.functions, c.streams, c.events),
    }
}

impl ExecutorState {
    pub fn kind(&self) -> ExecutorKind {
        match self {
            ExecutorState::OpenCl(_) => ExecutorKind::OpenCl,
            ExecutorState::Cuda(_) => ExecutorKind::Cuda,
        }
    }

    /// Objects whose contents a stream carries, as (the executor's own
    /// id, size), in the order the executor lists them.
    pub fn streamed(&self) -> Vec<(ObjectId, u64)> {
        match self {
            ExecutorState::OpenCl(s) => s.newest().streamed().collect(),
            ExecutorState::Cuda(s) => s.newest().streamed().collect(),
        }
    }

    /// Device memory and guest-held objects, for a quota check before
    /// anything is built.
    pub fn usage(&self) -> Usage {
        match self {
            ExecutorState::OpenCl(s) => s.newest().usage(),
            ExecutorState::Cuda(s) => cuda_usage(s.newest()),
        }
    }
}

impl From<OpenClStateV1> for ExecutorState {
    fn from(state: OpenClStateV1) -> Self {
        ExecutorState::OpenCl(OpenClState::V1(state))
    }
}

impl From<CudaSessionState> for ExecutorState {
    fn from(state: CudaSessionState) -> Self {
        ExecutorState::Cuda(CudaState::V2(state))
    }
}

fn unsupported(what: &'static str, version: u32, max: u32) -> DecodeError {
    DecodeError::UnsupportedVersion { what, version, max }
}

impl Codec for ExecutorKind {
    fn encode(&self, e: &mut Encoder) {
        e.u32(match self {
            ExecutorKind::OpenCl => 1,
            ExecutorKind::Cuda => 2,
        });
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.tag()? {
            (1, _) => Ok(ExecutorKind::OpenCl),
            (2, _) => Ok(ExecutorKind::Cuda),
            (tag, at) => Err(DecodeError::BadTag {
                what: "executor kind",
                tag,
                at,
            }),
        }
    }
}

/// A kind tag, then the executor's own versioned state.
impl Codec for ExecutorState {
    fn encode(&self, e: &mut Encoder) {
        self.kind().encode(e);
        match self {
            ExecutorState::OpenCl(s) => s.encode(e),
            ExecutorState::Cuda(s) => s.encode(e),
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match ExecutorKind::decode(d)? {
            ExecutorKind::OpenCl => OpenClState::decode(d).map(ExecutorState::OpenCl),
            ExecutorKind::Cuda => CudaState::decode(d).map(ExecutorState::Cuda),
        }
    }
}

impl Codec for OpenClState {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.version());
        match self {
            OpenClState::V1(s) => s.encode(e),
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.u32()? {
            1 => Ok(OpenClState::V1(OpenClStateV1::decode(d)?)),
            v => Err(unsupported("OpenCL state", v, OPENCL_STATE_VERSION)),
        }
    }
}

impl Codec for CudaState {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.version());
        match self {
            CudaState::V2(s) => s.encode(e),
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.u32()? {
            1 => Ok(CudaState::V2(CudaSessionStateV1::decode(d)?.into())),
            2 => Ok(CudaState::V2(CudaSessionState::decode(d)?)),
            v => Err(unsupported("CUDA state", v, CUDA_STATE_VERSION)),
        }
    }
}
