//! The state model of a whole vGPU: plain data, no OpenCL.
//!
//! Versioning: every type a stream stores at its top level is an enum with
//! one variant per released version (`VgpuState::V1`, `SessionState::V1`),
//! encoded as a `u32` version followed by that version's fields. Once a
//! version is released, its types (and everything they contain) are frozen:
//! a change adds a new version (`SessionStateV2`, say) and a variant for it,
//! with an upgrade from the previous one, and the decoder keeps reading
//! every released version. `latest()` gives the newest form of any of them.

mod device;
mod kernel;
mod objects;
mod program;
mod validate;

pub use device::DeviceIdentity;
pub use kernel::{KernelArg, KernelState};
pub use objects::{
    BufferState, ContextState, EventKind, EventState, GuestRef, ObjectId, PendingCommand,
    QueueState, SamplerState, SubRegion,
};
pub use program::{DeviceBinary, LinkInput, ProgramBuild, ProgramOrigin, ProgramState};
pub use validate::StateError;

use crate::codec::{self, record, Codec, DecodeError, Decoder, Encoder, Result};
use crate::profile::Profile;

/// The newest version of `VgpuState` and `SessionState` this build writes.
pub const STATE_VERSION: u32 = 1;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    V1(SessionStateV1),
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
    /// state order: the saver streams each of them whole.
    pub fn streamed_buffers(&self) -> Vec<StreamedBuffer> {
        let VgpuState::V1(state) = self;
        let mut out = Vec::new();
        for session in &state.sessions {
            let SessionState::V1(session) = session;
            for buffer in session.buffers.iter().filter(|b| b.parent.is_none()) {
                out.push(StreamedBuffer {
                    session: session.id,
                    buffer: buffer.id,
                    size: buffer.size,
                });
            }
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
    /// The newest session version, upgraded from whichever this one is.
    pub fn latest(self) -> SessionStateV1 {
        match self {
            SessionState::V1(session) => session,
        }
    }

    pub fn id(&self) -> u64 {
        match self {
            SessionState::V1(session) => session.id,
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

fn unsupported(what: &'static str, version: u32) -> DecodeError {
    DecodeError::UnsupportedVersion {
        what,
        version,
        max: STATE_VERSION,
    }
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
            version => Err(unsupported("vGPU state", version)),
        }
    }
}

impl Codec for SessionState {
    fn encode(&self, e: &mut Encoder) {
        match self {
            SessionState::V1(session) => {
                e.u32(1);
                session.encode(e);
            }
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.u32()? {
            1 => Ok(SessionState::V1(SessionStateV1::decode(d)?)),
            version => Err(unsupported("session state", version)),
        }
    }
}
