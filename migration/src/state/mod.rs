//! The state model of a whole vGPU: plain data, no OpenCL.
//!
//! Versioning: every type a stream stores at its top level is an enum with
//! one variant per released version (`VgpuState::V1`, `SessionState::V1`),
//! encoded as a `u32` version followed by that version's fields. Once a
//! version is released, its types (and everything they contain) are frozen:
//! a change adds a new version (`SessionStateV2`, say) and a variant for it,
//! with an upgrade from the previous one, and the decoder keeps reading
//! every released version. `latest()` gives the newest form of any of them.
//!
//! Released: `VgpuState::V1`; `SessionState::V1` (OpenCL objects),
//! `SessionState::V2` (the same, plus the session's CUDA objects) and
//! `SessionState::V3` (V2, plus the sequence number of the last message the
//! session ran) and `SessionState::V4` (V3, plus OpenCL images; written only
//! for sessions that have images, so other states stay readable by builds
//! that know V3) and `SessionState::V5` (V4, plus sub-devices and the
//! devices of each context and queue; written only for sessions that have
//! sub-devices) and `SessionState::V6` (each executor's part in its own
//! versioned type, and a table of the contents the stream carries: see
//! `parts` and `executor`). This build writes V6 only; `SessionState::latest`
//! upgrades every earlier version into it, so nothing outside this module
//! knows their shapes.

mod cuda;
mod device;
mod executor;
mod image;
mod kernel;
mod objects;
mod parts;
mod program;
mod subdevice;
mod validate;

pub use cuda::{
    CudaAllocationState, CudaArch, CudaContextState, CudaDevice, CudaEventState,
    CudaFunctionAttribute, CudaFunctionState, CudaGlobalState, CudaImageKind, CudaIncompatible,
    CudaLimitState, CudaModuleState, CudaPrimaryState, CudaSessionState, CudaSessionStateV1,
    CudaStreamState,
};
pub use device::DeviceIdentity;
pub use executor::{
    CudaState, ExecutorKind, ExecutorState, OpenClState, OpenClStateV1, Usage, CUDA_STATE_VERSION,
    OPENCL_STATE_VERSION,
};
pub use image::ImageState;
pub use kernel::{KernelArg, KernelState};
pub use objects::{
    BufferState, ContextState, EventKind, EventState, GuestRef, ObjectId, PendingCommand,
    QueueState, SamplerState, SubRegion,
};
pub use parts::{ContentState, SessionStateV6};

/// The newest form of a session, which `SessionState::latest` gives: what
/// the backend works with, so it never names a version.
pub type LatestSession = SessionStateV6;
pub use program::{DeviceBinary, LinkInput, ProgramBuild, ProgramOrigin, ProgramState};
pub use subdevice::{DevicePlacement, DeviceTopology, SubDeviceState, ROOT_DEVICE};
pub use validate::StateError;

use crate::codec::{self, record, Codec, DecodeError, Decoder, Encoder, Result};
use crate::profile::Profile;

/// The newest version of `VgpuState` this build writes.
pub const STATE_VERSION: u32 = 1;
/// The newest version of `SessionState` this build writes.
pub const SESSION_STATE_VERSION: u32 = 6;

/// A whole vGPU, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VgpuState {
    V1(VgpuStateV1),
}

record! {
    pub struct VgpuStateV1 {
        /// The device profile the guest saw: a destination must honour it.
        pub profile: Profile,
        /// The device the state was taken on.
        pub device: DeviceIdentity,
        pub sessions: Vec<SessionState>,
    }
}

/// One guest process's objects, as stored.
// A state holds a handful of sessions, built and moved once per save.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    V1(SessionStateV1),
    V2(SessionStateV2),
    V3(SessionStateV3),
    V4(SessionStateV4),
    V5(SessionStateV5),
    V6(SessionStateV6),
}

record! {
    #[derive(Default)]
    pub struct SessionStateV1 {
        /// The session id the guest's batches carry (never 0).
        pub id: u64,
        /// The protocol version the session negotiated.
        pub protocol_version: u32,
        pub contexts: Vec<ContextState>,
        pub queues: Vec<QueueState>,
        pub buffers: Vec<BufferState>,
        pub samplers: Vec<SamplerState>,
        pub programs: Vec<ProgramState>,
        pub kernels: Vec<KernelState>,
        pub events: Vec<EventState>,
        /// Commands not yet run, in the order they were enqueued.
        pub pending: Vec<PendingCommand>,
    }
}

record! {
    /// A session's OpenCL objects (as in `SessionStateV1`) and CUDA objects.
    #[derive(Default)]
    pub struct SessionStateV2 {
        /// The session id the guest's batches carry (never 0).
        pub id: u64,
        /// The protocol version the session negotiated.
        pub protocol_version: u32,
        pub contexts: Vec<ContextState>,
        pub queues: Vec<QueueState>,
        pub buffers: Vec<BufferState>,
        pub samplers: Vec<SamplerState>,
        pub programs: Vec<ProgramState>,
        pub kernels: Vec<KernelState>,
        pub events: Vec<EventState>,
        /// Commands not yet run, in the order they were enqueued.
        pub pending: Vec<PendingCommand>,
        /// The session's CUDA objects, if it has any.
        pub cuda: Option<CudaSessionState>,
    }
}

record! {
    /// A session's objects (as in `SessionStateV2`) and where its guest's
    /// message sequence stood: a restore can tell whether the guest sent
    /// messages after the state was taken, which the state does not hold.
    pub struct SessionStateV3 {
        pub objects: SessionStateV2,
        /// The sequence number of the last message the session ran (0:
        /// none).
        pub last_seq: u64,
    }
}

record! {
    /// A session's objects and sequence (as in `SessionStateV3`) and its
    /// OpenCL images.
    pub struct SessionStateV4 {
        pub objects: SessionStateV2,
        pub last_seq: u64,
        pub images: Vec<ImageState>,
    }
}

record! {
    /// A session's objects, sequence and images (as in `SessionStateV4`)
    /// and its sub-devices.
    pub struct SessionStateV5 {
        pub objects: SessionStateV2,
        pub last_seq: u64,
        pub images: Vec<ImageState>,
        pub devices: DeviceTopology,
    }
}

impl From<SessionStateV1> for SessionStateV2 {
    fn from(s: SessionStateV1) -> Self {
        SessionStateV2 {
            id: s.id,
            protocol_version: s.protocol_version,
            contexts: s.contexts,
            queues: s.queues,
            buffers: s.buffers,
            samplers: s.samplers,
            programs: s.programs,
            kernels: s.kernels,
            events: s.events,
            pending: s.pending,
            cuda: None,
        }
    }
}

impl SessionStateV2 {
    /// Every buffer whose contents the stream carries, as (id, size): top-level
    /// OpenCL buffers, then CUDA allocations and globals.
    fn streamed(&self) -> impl Iterator<Item = (ObjectId, u64)> + '_ {
        self.buffers
            .iter()
            .filter(|b| b.parent.is_none())
            .map(|b| (b.id, b.size))
            .chain(self.cuda.iter().flat_map(|c| c.streamed()))
    }
}

/// A buffer whose contents a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamedBuffer {
    pub session: u64,
    pub buffer: ObjectId,
    pub size: u64,
}

impl VgpuState {
    /// The newest state version, upgraded from whichever this one is.
    pub fn latest(self) -> VgpuStateV1 {
        match self {
            VgpuState::V1(state) => state,
        }
    }

    pub fn version(&self) -> u32 {
        match self {
            VgpuState::V1(_) => 1,
        }
    }

    pub fn profile(&self) -> &Profile {
        match self {
            VgpuState::V1(state) => &state.profile,
        }
    }

    pub fn device(&self) -> &DeviceIdentity {
        match self {
            VgpuState::V1(state) => &state.device,
        }
    }

    /// Every buffer (not sub-buffer) whose contents the stream carries, in
    /// state order: the saver streams each of them whole. A session's CUDA
    /// allocations and globals come after its OpenCL buffers.
    pub fn streamed_buffers(&self) -> Vec<StreamedBuffer> {
        let VgpuState::V1(state) = self;
        let mut out = Vec::new();
        for session in &state.sessions {
            let (id, streamed): (u64, Vec<(ObjectId, u64)>) = match session {
                SessionState::V1(s) => (
                    s.id,
                    s.buffers
                        .iter()
                        .filter(|b| b.parent.is_none())
                        .map(|b| (b.id, b.size))
                        .collect(),
                ),
                SessionState::V2(s) => (s.id, s.streamed().collect()),
                SessionState::V3(s) => (s.objects.id, s.objects.streamed().collect()),
                SessionState::V4(s) => (s.objects.id, s.streamed().collect()),
                SessionState::V5(s) => (s.objects.id, streamed(&s.objects, &s.images).collect()),
                SessionState::V6(s) => (s.id, s.streamed().collect()),
            };
            out.extend(streamed.into_iter().map(|(buffer, size)| StreamedBuffer {
                session: id,
                buffer,
                size,
            }));
        }
        out
    }

    /// Checks that ids are unique and every reference resolves.
    pub fn validate(&self) -> std::result::Result<(), StateError> {
        validate::vgpu(self)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        codec::to_bytes(self)
    }

    /// Decodes a whole encoded state (any input: a value or an error).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        codec::from_bytes(bytes)
    }
}

impl SessionState {
    /// The sequence number of the last message the session ran, where the
    /// version records it.
    pub fn last_seq(&self) -> Option<u64> {
        match self {
            SessionState::V1(_) | SessionState::V2(_) => None,
            SessionState::V3(session) => Some(session.last_seq),
            SessionState::V4(session) => Some(session.last_seq),
            SessionState::V5(session) => Some(session.last_seq),
            SessionState::V6(session) => session.last_seq,
        }
    }

    pub fn id(&self) -> u64 {
        match self {
            SessionState::V1(session) => session.id,
            SessionState::V2(session) => session.id,
            SessionState::V3(session) => session.objects.id,
            SessionState::V4(session) => session.objects.id,
            SessionState::V5(session) => session.objects.id,
            SessionState::V6(session) => session.id,
        }
    }

    pub fn version(&self) -> u32 {
        match self {
            SessionState::V1(_) => 1,
            SessionState::V2(_) => 2,
            SessionState::V3(_) => 3,
            SessionState::V4(_) => 4,
            SessionState::V5(_) => 5,
            SessionState::V6(_) => 6,
        }
    }
}

impl From<VgpuStateV1> for VgpuState {
    fn from(state: VgpuStateV1) -> Self {
        VgpuState::V1(state)
    }
}

impl From<SessionStateV1> for SessionState {
    fn from(session: SessionStateV1) -> Self {
        SessionState::V1(session)
    }
}

impl From<SessionStateV2> for SessionState {
    fn from(session: SessionStateV2) -> Self {
        SessionState::V2(session)
    }
}

impl From<SessionStateV3> for SessionState {
    fn from(session: SessionStateV3) -> Self {
        SessionState::V3(session)
    }
}

impl From<SessionStateV4> for SessionState {
    fn from(session: SessionStateV4) -> Self {
        SessionState::V4(session)
    }
}

impl From<SessionStateV5> for SessionState {
    fn from(session: SessionStateV5) -> Self {
        SessionState::V5(session)
    }
}

impl From<SessionStateV6> for SessionState {
    fn from(session: SessionStateV6) -> Self {
        SessionState::V6(session)
    }
}

impl SessionStateV4 {
    /// Streamed contents: OpenCL buffers, then images with contents of
    /// their own, then CUDA allocations and globals.
    fn streamed(&self) -> impl Iterator<Item = (ObjectId, u64)> + '_ {
        streamed(&self.objects, &self.images)
    }
}

/// What `SessionStateV4::streamed` lists, for any version with images.
fn streamed<'a>(
    objects: &'a SessionStateV2,
    images: &'a [ImageState],
) -> impl Iterator<Item = (ObjectId, u64)> + 'a {
    let buffers = objects.buffers.iter().filter(|b| b.parent.is_none());
    buffers
        .map(|b| (b.id, b.size))
        .chain(
            images
                .iter()
                .filter(|i| i.buffer.is_none())
                .map(|i| (i.id, i.size)),
        )
        .chain(objects.cuda.iter().flat_map(|c| c.streamed()))
}

fn unsupported(what: &'static str, version: u32, max: u32) -> DecodeError {
    DecodeError::UnsupportedVersion { what, version, max }
}

impl Codec for VgpuState {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.version());
        match self {
            VgpuState::V1(state) => state.encode(e),
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.u32()? {
            1 => Ok(VgpuState::V1(VgpuStateV1::decode(d)?)),
            version => Err(unsupported("vGPU state", version, STATE_VERSION)),
        }
    }
}

impl Codec for SessionState {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.version());
        match self {
            SessionState::V1(session) => session.encode(e),
            SessionState::V2(session) => session.encode(e),
            SessionState::V3(session) => session.encode(e),
            SessionState::V4(session) => session.encode(e),
            SessionState::V5(session) => session.encode(e),
            SessionState::V6(session) => session.encode(e),
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.u32()? {
            1 => Ok(SessionState::V1(SessionStateV1::decode(d)?)),
            2 => Ok(SessionState::V2(SessionStateV2::decode(d)?)),
            3 => Ok(SessionState::V3(SessionStateV3::decode(d)?)),
            4 => Ok(SessionState::V4(SessionStateV4::decode(d)?)),
            5 => Ok(SessionState::V5(SessionStateV5::decode(d)?)),
            6 => Ok(SessionState::V6(SessionStateV6::decode(d)?)),
            version => Err(unsupported("session state", version, SESSION_STATE_VERSION)),
        }
    }
}
