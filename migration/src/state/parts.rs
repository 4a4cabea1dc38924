//! Session state version 6: a session as a list of executor parts, and the
//! upgrade of every earlier version into it.
//!
//! Versions 1 to 5 stored one record with fields for every API, so the
//! layer above the executors had to merge and split them. Version 6 stores
//! each executor's part in that executor's own type (see `executor`), plus
//! a table of the contents the stream carries: each entry names a part and
//! that part's own object, under a key unique in the session. Executors
//! number their objects as they like; only the key travels in the buffer
//! chunks. The upgrade of an earlier version keeps the object ids as keys,
//! so its buffer chunks need no translation.

use super::executor::{ExecutorState, OpenClStateV1};
use super::objects::ObjectId;
use super::{
    SessionState, SessionStateV1, SessionStateV2, SessionStateV3, SessionStateV4, SessionStateV5,
};
use crate::codec::record;

record! {
    /// Where one object's contents travel in the stream.
    pub struct ContentState {
        /// The key of its buffer chunks (unique in the session, never 0).
        pub key: ObjectId,
        /// Its part's index in `SessionStateV6::parts`.
        pub part: u32,
        /// The object, by its part's own id.
        pub object: ObjectId,
        pub size: u64,
    }
}

record! {
    /// A guest process's objects, one part per executor holding some.
    #[derive(Default)]
    pub struct SessionStateV6 {
        /// The session id the guest's batches carry (never 0).
        pub id: u64,
        /// The protocol version the session negotiated.
        pub protocol_version: u32,
        /// The sequence number of the last message the session ran (0:
        /// none), where recorded (versions 1 and 2 did not).
        pub last_seq: Option<u64>,
        /// At most one part per executor kind.
        pub parts: Vec<ExecutorState>,
        /// Every object of every part whose contents the stream carries.
        pub contents: Vec<ContentState>,
    }
}

impl SessionStateV6 {
    /// The contents the stream carries, as (key, size), in state order.
    pub fn streamed(&self) -> impl Iterator<Item = (ObjectId, u64)> + '_ {
        self.contents.iter().map(|c| (c.key, c.size))
    }
}

/// The parts of an earlier version: the OpenCL objects (with images and
/// sub-devices where the version has them), then the CUDA objects; each
/// object's contents keyed by its id, as those versions streamed them.
fn upgrade(
    objects: SessionStateV2,
    last_seq: Option<u64>,
    images: Vec<super::ImageState>,
    devices: super::DeviceTopology,
) -> SessionStateV6 {
    let SessionStateV2 {
        id,
        protocol_version,
        contexts,
        queues,
        buffers,
        samplers,
        programs,
        kernels,
        events,
        pending,
        cuda,
    } = objects;
    let opencl = OpenClStateV1 {
        contexts,
        queues,
        buffers,
        samplers,
        programs,
        kernels,
        events,
        pending,
        images,
        devices,
    };
    let mut parts: Vec<ExecutorState> = Vec::new();
    if !opencl.is_empty() {
        parts.push(opencl.into());
    }
    if let Some(cuda) = cuda {
        parts.push(cuda.into());
    }
    let contents = parts
        .iter()
        .enumerate()
        .flat_map(|(part, state)| {
            state
                .streamed()
                .into_iter()
                .map(move |(object, size)| ContentState {
                    key: object,
                    part: part as u32,
                    object,
                    size,
                })
        })
        .collect();
    SessionStateV6 {
        id,
        protocol_version,
        last_seq,
        parts,
        contents,
    }
}

impl SessionState {
    /// The newest session version, upgraded from whichever this one is:
    /// the only place that knows the earlier versions' shapes.
    pub fn latest(self) -> SessionStateV6 {
        let none = super::DeviceTopology::default;
        match self {
            SessionState::V1(s) => upgrade(SessionStateV2::from(s), None, Vec::new(), none()),
            SessionState::V2(s) => upgrade(s, None, Vec::new(), none()),
            SessionState::V3(SessionStateV3 { objects, last_seq }) => {
                upgrade(objects, Some(last_seq), Vec::new(), none())
            }
            SessionState::V4(SessionStateV4 {
                objects,
                last_seq,
                images,
            }) => upgrade(objects, Some(last_seq), images, none()),
            SessionState::V5(SessionStateV5 {
                objects,
                last_seq,
                images,
                devices,
            }) => upgrade(objects, Some(last_seq), images, devices),
            SessionState::V6(s) => s,
        }
    }
}

impl From<SessionStateV1> for SessionStateV6 {
    fn from(s: SessionStateV1) -> Self {
        SessionState::V1(s).latest()
    }
}
