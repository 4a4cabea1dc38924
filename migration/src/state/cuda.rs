//! The CUDA part of a session: what the CUDA executor rebuilds on the
//! destination GPU.
//!
//! Device pointers are visible to the guest, so allocations keep their
//! addresses: a restore maps each one at the address it had. Modules keep
//! their image (PTX, a fat binary or a cubin) with the architectures it
//! holds code for, so a destination can be refused before anything is built
//! when none of that code can run there. Globals the guest looked up keep
//! the address it was given. Contents of allocations and globals travel as
//! the stream's buffer chunks, under the key the session's contents table
//! gives the record's `id` (its `id` itself in versions 2 to 5).
//!
//! The guest's context stack never leaves the guest (every call names its
//! context), so it has no record here; the primary context's retain count
//! does.

use super::objects::{GuestRef, ObjectId};
use crate::codec::{record, Codec, DecodeError, Decoder, Encoder, Result};

/// A compute capability (`sm_XY`: major X, minor Y).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CudaArch {
    pub major: u32,
    pub minor: u32,
}

impl CudaArch {
    pub const fn new(major: u32, minor: u32) -> Self {
        CudaArch { major, minor }
    }

    /// From the `sm_XY` number (`90` is 9.0, `100` is 10.0, `121` is 12.1).
    pub const fn from_sm(sm: u32) -> Self {
        CudaArch {
            major: sm / 10,
            minor: sm % 10,
        }
    }

    /// Whether a cubin built for `self` runs on a GPU of compute capability
    /// `device`: same major version, equal or newer minor one.
    pub fn cubin_runs_on(self, device: CudaArch) -> bool {
        self.major == device.major && self.minor <= device.minor
    }
}

impl std::fmt::Display for CudaArch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sm_{}{}", self.major, self.minor)
    }
}

impl Codec for CudaArch {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.major);
        e.u32(self.minor);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        Ok(CudaArch {
            major: d.u32()?,
            minor: d.u32()?,
        })
    }
}

/// What a module was loaded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CudaImageKind {
    /// PTX text: JIT-compiled for the device it is loaded on.
    Ptx,
    /// A device ELF: runs only where its architecture does.
    Cubin,
    /// A fat binary: cubins for some architectures, usually PTX too.
    Fatbin,
}

impl Codec for CudaImageKind {
    fn encode(&self, e: &mut Encoder) {
        e.u32(match self {
            CudaImageKind::Ptx => 1,
            CudaImageKind::Cubin => 2,
            CudaImageKind::Fatbin => 3,
        });
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.tag()? {
            (1, _) => Ok(CudaImageKind::Ptx),
            (2, _) => Ok(CudaImageKind::Cubin),
            (3, _) => Ok(CudaImageKind::Fatbin),
            (tag, at) => Err(DecodeError::BadTag {
                what: "CUDA image kind",
                tag,
                at,
            }),
        }
    }
}

record! {
    /// The GPU a session's CUDA objects lived on.
    #[derive(Default)]
    pub struct CudaDevice {
        pub name: String,
        pub uuid: Vec<u8>,
        /// Compute capability.
        pub arch: CudaArch,
        pub total_mem: u64,
        /// `cuDriverGetVersion`.
        pub driver_version: u32,
    }
}

record! {
    pub struct CudaContextState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        /// `cuCtxCreate` flags.
        pub flags: u32,
    }
}

record! {
    /// The guest's primary context of device 0.
    #[derive(Copy)]
    pub struct CudaPrimaryState {
        pub context: ObjectId,
        /// `cuDevicePrimaryCtxRetain` count.
        pub refs: u32,
    }
}

record! {
    /// Device memory the guest allocated; its contents are streamed.
    #[derive(Copy)]
    pub struct CudaAllocationState {
        /// Key of the contents in the stream.
        pub id: ObjectId,
        /// The device address the guest holds (restored at the same one).
        pub address: u64,
        pub size: u64,
    }
}

record! {
    pub struct CudaModuleState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        pub kind: CudaImageKind,
        /// Shared with the live module: a capture takes no copy.
        pub image: crate::SharedBytes,
        /// The lowest compute capability that can JIT the module's PTX (its
        /// `.target`); `None` when the image holds no PTX.
        pub ptx_target: Option<CudaArch>,
        /// The architectures of the cubins it holds.
        pub cubin_archs: Vec<CudaArch>,
    }
}

record! {
    /// A `__device__` variable of a module whose address the guest looked
    /// up; its contents are streamed.
    pub struct CudaGlobalState {
        /// Key of the contents in the stream.
        pub id: ObjectId,
        pub module: ObjectId,
        pub name: Vec<u8>,
        /// The address the guest was given (kept on restore, translated to
        /// wherever the reloaded module put the variable).
        pub address: u64,
        pub size: u64,
    }
}

record! {
    /// A function attribute the guest set (`cuFuncSetAttribute`).
    #[derive(Copy)]
    pub struct CudaFunctionAttribute {
        pub attribute: u32,
        pub value: i32,
    }
}

record! {
    pub struct CudaFunctionState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub module: ObjectId,
        pub name: Vec<u8>,
        /// Attributes set, in the order they were last set.
        pub attributes: Vec<CudaFunctionAttribute>,
        /// `cuFuncSetCacheConfig`, when the guest set one.
        pub cache_config: Option<u32>,
    }
}

record! {
    pub struct CudaStreamState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        pub flags: u32,
        pub priority: i32,
    }
}

record! {
    /// An event. Work is drained before a save, so a recorded event is
    /// complete; a restore records it again, so it reads complete.
    pub struct CudaEventState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        pub flags: u32,
        pub recorded: bool,
    }
}

record! {
    /// A limit the guest set on a context (`cuCtxSetLimit`).
    #[derive(Copy)]
    pub struct CudaLimitState {
        pub context: ObjectId,
        /// `CUlimit`.
        pub limit: u32,
        pub value: u64,
        /// Device memory the limit was charged against the VM's quota.
        pub charged: u64,
    }
}

record! {
    /// Every CUDA object of one session.
    #[derive(Default)]
    pub struct CudaSessionState {
        pub device: CudaDevice,
        pub primary: Option<CudaPrimaryState>,
        pub contexts: Vec<CudaContextState>,
        pub allocations: Vec<CudaAllocationState>,
        pub modules: Vec<CudaModuleState>,
        pub globals: Vec<CudaGlobalState>,
        pub functions: Vec<CudaFunctionState>,
        pub streams: Vec<CudaStreamState>,
        pub events: Vec<CudaEventState>,
        /// Context limits the guest set (version 2 on).
        pub limits: Vec<CudaLimitState>,
    }
}

record! {
    /// Version 1 of [`CudaSessionState`]: no context limits.
    pub struct CudaSessionStateV1 {
        pub device: CudaDevice,
        pub primary: Option<CudaPrimaryState>,
        pub contexts: Vec<CudaContextState>,
        pub allocations: Vec<CudaAllocationState>,
        pub modules: Vec<CudaModuleState>,
        pub globals: Vec<CudaGlobalState>,
        pub functions: Vec<CudaFunctionState>,
        pub streams: Vec<CudaStreamState>,
        pub events: Vec<CudaEventState>,
    }
}

impl From<CudaSessionStateV1> for CudaSessionState {
    /// Contexts of version 1 had the driver's default limits.
    fn from(v1: CudaSessionStateV1) -> Self {
        CudaSessionState {
            device: v1.device,
            primary: v1.primary,
            contexts: v1.contexts,
            allocations: v1.allocations,
            modules: v1.modules,
            globals: v1.globals,
            functions: v1.functions,
            streams: v1.streams,
            events: v1.events,
            limits: Vec::new(),
        }
    }
}

impl CudaModuleState {
    /// Whether the module can be loaded on a GPU of compute capability
    /// `device`: one of its cubins runs there, or its PTX can be JIT-compiled
    /// for it.
    pub fn loads_on(&self, device: CudaArch) -> bool {
        self.cubin_archs.iter().any(|a| a.cubin_runs_on(device))
            || self.ptx_target.is_some_and(|t| t <= device)
    }

    /// The guest's name for the module in messages.
    fn label(&self) -> String {
        match self.guest {
            Some(g) => format!("module {:#x}", g.handle),
            None => format!("module (id {:#x}, released)", self.id),
        }
    }
}

impl CudaSessionState {
    /// Whether every object could be rebuilt on `device`: each module has
    /// code that runs there, and the allocations fit its memory. Lists
    /// every shortfall.
    pub fn check(&self, device: &CudaDevice) -> std::result::Result<(), CudaIncompatible> {
        let mut shortfalls = Vec::new();
        for m in &self.modules {
            if m.loads_on(device.arch) {
                continue;
            }
            let cubins = m
                .cubin_archs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            shortfalls.push(match (m.ptx_target, cubins.is_empty()) {
                (None, false) => format!(
                    "{} holds device code only for {cubins} and no PTX; this GPU is {} (load it from PTX or a fat binary with PTX to make it portable)",
                    m.label(),
                    device.arch
                ),
                (None, true) => format!(
                    "{} holds no PTX and no cubin of a known architecture; this GPU is {}",
                    m.label(),
                    device.arch
                ),
                (Some(target), _) => format!(
                    "{}'s PTX needs compute capability {} or newer{}; this GPU is {}",
                    m.label(),
                    target,
                    if cubins.is_empty() {
                        String::new()
                    } else {
                        format!(" (its cubins are for {cubins})")
                    },
                    device.arch
                ),
            });
        }
        let needed = self.allocated_bytes();
        if needed > device.total_mem {
            shortfalls.push(format!(
                "its allocations take {needed} bytes; this GPU has {}",
                device.total_mem
            ));
        }
        if shortfalls.is_empty() {
            Ok(())
        } else {
            Err(CudaIncompatible {
                device: format!("{} ({})", device.name, device.arch),
                shortfalls,
            })
        }
    }

    /// Bytes of device memory the allocations take.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocations
            .iter()
            .fold(0u64, |sum, a| sum.saturating_add(a.size))
    }

    /// Every record whose contents a stream carries, as (id, size):
    /// allocations, then globals.
    pub fn streamed(&self) -> impl Iterator<Item = (ObjectId, u64)> + '_ {
        self.allocations
            .iter()
            .map(|a| (a.id, a.size))
            .chain(self.globals.iter().map(|g| (g.id, g.size)))
            .filter(|(_, size)| *size > 0)
    }
}

/// Why a session's CUDA objects cannot move to a GPU.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the CUDA objects cannot move to {device}: {}", shortfalls.join("; "))]
pub struct CudaIncompatible {
    pub device: String,
    pub shortfalls: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{from_bytes, to_bytes};

    pub(crate) fn module(
        kind: CudaImageKind,
        ptx: Option<CudaArch>,
        cubins: &[u32],
    ) -> CudaModuleState {
        CudaModuleState {
            id: 5,
            guest: Some(GuestRef { handle: 5, refs: 1 }),
            context: 3,
            kind,
            image: b".version 8.0\n.target sm_90\n".to_vec().into(),
            ptx_target: ptx,
            cubin_archs: cubins.iter().map(|s| CudaArch::from_sm(*s)).collect(),
        }
    }

    fn h100() -> CudaDevice {
        CudaDevice {
            name: "H100".into(),
            uuid: vec![1; 16],
            arch: CudaArch::new(9, 0),
            total_mem: 80 << 30,
            driver_version: 13000,
        }
    }

    #[test]
    fn arch_rules() {
        let sm86 = CudaArch::from_sm(86);
        assert_eq!(sm86, CudaArch::new(8, 6));
        assert_eq!(CudaArch::from_sm(120).to_string(), "sm_120");
        assert!(CudaArch::from_sm(80).cubin_runs_on(sm86));
        assert!(!sm86.cubin_runs_on(CudaArch::from_sm(80)));
        assert!(!CudaArch::from_sm(80).cubin_runs_on(CudaArch::from_sm(90)));
        assert!(CudaArch::from_sm(80) < CudaArch::from_sm(90));
    }

    #[test]
    fn modules_load_where_their_code_runs() {
        let sm90 = CudaArch::new(9, 0);
        let sm80 = CudaArch::new(8, 0);
        let ptx = module(CudaImageKind::Ptx, Some(CudaArch::new(8, 0)), &[]);
        assert!(ptx.loads_on(sm90) && ptx.loads_on(sm80));
        assert!(!ptx.loads_on(CudaArch::new(7, 5)));
        let cubin = module(CudaImageKind::Cubin, None, &[90]);
        assert!(cubin.loads_on(sm90));
        assert!(!cubin.loads_on(sm80));
        assert!(!cubin.loads_on(CudaArch::new(10, 0)));
        let fat = module(CudaImageKind::Fatbin, Some(sm90), &[80, 90]);
        assert!(fat.loads_on(sm80) && fat.loads_on(CudaArch::new(12, 0)));
    }

    #[test]
    fn a_cubin_only_module_for_another_architecture_is_refused_clearly() {
        let mut session = CudaSessionState {
            device: h100(),
            modules: vec![module(CudaImageKind::Cubin, None, &[100])],
            ..Default::default()
        };
        assert_eq!(session.check(&session.device.clone()).unwrap_err().to_string(),
            "the CUDA objects cannot move to H100 (sm_90): module 0x5 holds device code only for sm_100 and no PTX; this GPU is sm_90 (load it from PTX or a fat binary with PTX to make it portable)");
        session.modules[0] = module(CudaImageKind::Fatbin, Some(CudaArch::new(10, 0)), &[100]);
        session.allocations.push(CudaAllocationState {
            id: 1,
            address: 0x2000_0000_0000,
            size: 100 << 30,
        });
        let err = session.check(&h100()).unwrap_err();
        assert_eq!(err.shortfalls.len(), 2, "{err}");
        assert!(err.shortfalls[0].contains("PTX needs compute capability sm_100 or newer"));
        assert!(err.shortfalls[1].contains("allocations take 107374182400 bytes"));
        session.modules[0] = module(CudaImageKind::Ptx, Some(CudaArch::new(9, 0)), &[]);
        session.allocations.clear();
        assert_eq!(session.check(&h100()), Ok(()));
    }

    #[test]
    fn cuda_session_round_trips() {
        let session = rich_cuda_session();
        assert_eq!(
            from_bytes::<CudaSessionState>(&to_bytes(&session)),
            Ok(session)
        );
        for kind in [
            CudaImageKind::Ptx,
            CudaImageKind::Cubin,
            CudaImageKind::Fatbin,
        ] {
            assert_eq!(from_bytes::<CudaImageKind>(&to_bytes(&kind)), Ok(kind));
        }
        assert!(matches!(
            from_bytes::<CudaImageKind>(&7u32.to_le_bytes()),
            Err(DecodeError::BadTag { tag: 7, .. })
        ));
    }

    #[test]
    fn a_v1_cuda_part_reads_as_one_without_limits() {
        use crate::state::CudaState;
        let mut session = rich_cuda_session();
        session.limits.clear();
        let v1 = CudaSessionStateV1 {
            device: session.device.clone(),
            primary: session.primary,
            contexts: session.contexts.clone(),
            allocations: session.allocations.clone(),
            modules: session.modules.clone(),
            globals: session.globals.clone(),
            functions: session.functions.clone(),
            streams: session.streams.clone(),
            events: session.events.clone(),
        };
        let mut e = crate::codec::Encoder::new();
        e.u32(1);
        v1.encode(&mut e);
        let read = from_bytes::<CudaState>(&e.into_bytes()).expect("a version 1 part");
        assert_eq!(read, CudaState::V2(session));
        assert_eq!(read.version(), 2);
    }

    #[test]
    fn streamed_records_are_allocations_then_globals() {
        let session = rich_cuda_session();
        let streamed: Vec<_> = session.streamed().collect();
        assert_eq!(
            streamed,
            vec![
                (0x2000_0000_0000, 4096),
                (0x2000_0020_0000, 10),
                (0x7f00_0000_1000, 1024)
            ]
        );
    }

    fn v2_state(cuda: CudaSessionState) -> crate::state::VgpuState {
        use crate::state::*;
        VgpuStateV1 {
            profile: crate::Profile::default(),
            device: DeviceIdentity::default(),
            sessions: vec![
                SessionStateV1 {
                    id: 1,
                    protocol_version: 1,
                    ..Default::default()
                }
                .into(),
                SessionStateV2 {
                    id: 2,
                    protocol_version: 1,
                    cuda: Some(cuda),
                    ..Default::default()
                }
                .into(),
            ],
        }
        .into()
    }

    #[test]
    fn v2_sessions_round_trip_validate_and_stream_their_cuda_contents() {
        use crate::state::*;
        let state = v2_state(rich_cuda_session());
        assert_eq!(state.validate(), Ok(()));
        assert_eq!(VgpuState::from_bytes(&state.to_bytes()), Ok(state.clone()));
        let streamed: Vec<_> = state
            .streamed_buffers()
            .iter()
            .map(|b| (b.session, b.buffer, b.size))
            .collect();
        assert_eq!(
            streamed,
            vec![
                (2, 0x2000_0000_0000, 4096),
                (2, 0x2000_0020_0000, 10),
                (2, 0x7f00_0000_1000, 1024)
            ]
        );
        let latest = state.latest();
        assert_eq!(latest.sessions[0].version(), 1);
        assert!(latest.sessions[0].clone().latest().parts.is_empty());
        let v6 = latest.sessions[1].clone().latest();
        assert_eq!(v6.id, 2);
        assert_eq!(v6.parts, vec![ExecutorState::from(rich_cuda_session())]);
        let keys: Vec<_> = v6.streamed().map(|(key, _)| (2, key)).collect();
        let streamed: Vec<_> = streamed.iter().map(|(s, b, _)| (*s, *b)).collect();
        assert_eq!(keys, streamed, "contents keep their keys");
    }

    #[test]
    fn a_v1_session_upgrades_to_an_opencl_part_alone() {
        use crate::state::*;
        let v1 = SessionStateV1 {
            id: 4,
            protocol_version: 1,
            contexts: vec![ContextState {
                id: 1,
                guest: Some(GuestRef { handle: 1, refs: 1 }),
                properties: vec![],
            }],
            ..Default::default()
        };
        let v6 = SessionState::V1(v1.clone()).latest();
        assert_eq!((v6.id, v6.last_seq), (4, None));
        let opencl = OpenClStateV1 {
            contexts: v1.contexts,
            ..Default::default()
        };
        assert_eq!(v6.parts, vec![ExecutorState::from(opencl)]);
    }

    #[test]
    fn unknown_session_versions_are_refused() {
        use crate::state::*;
        let mut e = crate::codec::Encoder::new();
        e.u32(SESSION_STATE_VERSION + 1);
        let err = from_bytes::<SessionState>(&e.into_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "unsupported session state version {} (this build reads 1..={SESSION_STATE_VERSION})",
                SESSION_STATE_VERSION + 1
            )
        );
    }

    #[test]
    fn a_v3_session_round_trips_with_its_last_message_number() {
        use crate::state::*;
        let session = SessionState::V3(SessionStateV3 {
            objects: SessionStateV2 {
                id: 6,
                protocol_version: 1,
                ..Default::default()
            },
            last_seq: 1234,
        });
        let back = from_bytes::<SessionState>(&crate::codec::to_bytes(&session)).unwrap();
        assert_eq!(back, session);
        assert_eq!(back.last_seq(), Some(1234));
        assert_eq!(back.id(), 6);
        assert_eq!(back.clone().latest().last_seq, Some(1234));
        assert_eq!(SessionState::V6(back.latest()).last_seq(), Some(1234));
    }

    #[test]
    fn inconsistent_cuda_parts_are_refused() {
        use crate::state::StateError;
        let check = |edit: &dyn Fn(&mut CudaSessionState)| {
            let mut c = rich_cuda_session();
            edit(&mut c);
            v2_state(c).validate()
        };
        assert!(matches!(
            check(&|c| c.modules[0].context = 77),
            Err(StateError::Dangling { target: 77, .. })
        ));
        assert!(matches!(
            check(&|c| c.functions[0].module = 78),
            Err(StateError::Dangling { target: 78, .. })
        ));
        assert!(matches!(
            check(&|c| c.globals[0].module = 79),
            Err(StateError::Dangling { target: 79, .. })
        ));
        assert!(matches!(
            check(&|c| c.primary = Some(CudaPrimaryState {
                context: 80,
                refs: 1
            })),
            Err(StateError::Dangling { target: 80, .. })
        ));
        assert!(matches!(
            check(&|c| c.streams[0].guest = c.events[0].guest.map(|g| GuestRef { refs: 0, ..g })),
            Err(StateError::ZeroRefs { .. })
        ));
        assert!(matches!(
            check(&|c| c.events[1].guest = c.events[0].guest),
            Err(StateError::BadHandle { .. })
        ));
        assert!(matches!(
            check(&|c| c.allocations[1].address = 0x2000_0000_0800),
            Err(StateError::BadAllocation {
                reason: "overlaps another",
                ..
            })
        ));
        assert!(matches!(
            check(&|c| c.allocations[1].size = 0),
            Err(StateError::BadAllocation {
                reason: "is empty",
                ..
            })
        ));
        assert!(matches!(
            check(&|c| c.allocations[1].address = u64::MAX),
            Err(StateError::BadAllocation {
                reason: "wraps around",
                ..
            })
        ));
        assert!(matches!(
            check(&|c| c.globals[0].id = c.allocations[0].id),
            Err(StateError::StreamedId { .. })
        ));
        assert!(matches!(
            check(&|c| c.allocations[0].id = 0),
            Err(StateError::BadId { .. })
        ));
    }

    /// A CUDA part that uses every record and variant.
    pub(crate) fn rich_cuda_session() -> CudaSessionState {
        let g = |handle| Some(GuestRef { handle, refs: 1 });
        CudaSessionState {
            device: h100(),
            primary: Some(CudaPrimaryState {
                context: 3,
                refs: 2,
            }),
            contexts: vec![
                CudaContextState {
                    id: 3,
                    guest: g(3),
                    flags: 0,
                },
                CudaContextState {
                    id: 1 << 63,
                    guest: None,
                    flags: 4,
                },
            ],
            allocations: vec![
                CudaAllocationState {
                    id: 0x2000_0000_0000,
                    address: 0x2000_0000_0000,
                    size: 4096,
                },
                CudaAllocationState {
                    id: 0x2000_0020_0000,
                    address: 0x2000_0020_0000,
                    size: 10,
                },
            ],
            modules: vec![
                module(CudaImageKind::Ptx, Some(CudaArch::new(9, 0)), &[]),
                CudaModuleState {
                    id: 6,
                    guest: g(6),
                    context: 1 << 63,
                    kind: CudaImageKind::Fatbin,
                    image: vec![0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0].into(),
                    ptx_target: None,
                    cubin_archs: vec![CudaArch::new(8, 0), CudaArch::new(9, 0)],
                },
            ],
            globals: vec![
                CudaGlobalState {
                    id: 0x7f00_0000_1000,
                    module: 5,
                    name: b"table".to_vec(),
                    address: 0x7f00_0000_1000,
                    size: 1024,
                },
                CudaGlobalState {
                    id: 0x7f00_0000_2000,
                    module: 5,
                    name: b"empty".to_vec(),
                    address: 0x7f00_0000_2000,
                    size: 0,
                },
            ],
            functions: vec![
                CudaFunctionState {
                    id: 8,
                    guest: g(8),
                    module: 5,
                    name: b"vec_add".to_vec(),
                    attributes: vec![CudaFunctionAttribute {
                        attribute: 8,
                        value: 65536,
                    }],
                    cache_config: Some(1),
                },
                CudaFunctionState {
                    id: 9,
                    guest: g(9),
                    module: 6,
                    name: b"scale".to_vec(),
                    attributes: vec![],
                    cache_config: None,
                },
            ],
            streams: vec![CudaStreamState {
                id: 10,
                guest: g(10),
                context: 3,
                flags: 1,
                priority: -1,
            }],
            events: vec![
                CudaEventState {
                    id: 11,
                    guest: g(11),
                    context: 3,
                    flags: 2,
                    recorded: true,
                },
                CudaEventState {
                    id: 12,
                    guest: Some(GuestRef {
                        handle: 12,
                        refs: 1,
                    }),
                    context: 3,
                    flags: 0,
                    recorded: false,
                },
            ],
            limits: vec![CudaLimitState {
                context: 3,
                limit: 2,
                value: 64 << 20,
                charged: 64 << 20,
            }],
        }
    }
}
