//! Round trips of every state type, version handling, and consistency
//! checks.

mod common;

use common::*;
use vgpu_migration::*;

#[test]
fn rich_state_round_trips_through_bytes() {
    let state = rich_state();
    assert_eq!(state.validate(), Ok(()));
    let bytes = state.to_bytes();
    assert_eq!(VgpuState::from_bytes(&bytes), Ok(state));
}

#[test]
fn every_variant_round_trips_alone() {
    let base = rich_session(1);
    let mut variants: Vec<SessionStateV1> = Vec::new();
    for arg in base.kernels[0].args.clone() {
        let mut s = base.clone();
        s.kernels[0].args = vec![arg];
        variants.push(s);
    }
    for program in base.programs.clone() {
        let mut s = base.clone();
        s.programs[0].origin = program.origin;
        s.programs[0].build = program.build;
        variants.push(s);
    }
    for kind in [
        EventKind::User { status: -5 },
        EventKind::Command { status: 1 },
    ] {
        let mut s = base.clone();
        s.events[0].kind = kind;
        variants.push(s);
    }
    for session in variants {
        let state: VgpuState = VgpuStateV1 {
            profile: Profile::default(),
            device: DeviceIdentity::default(),
            sessions: vec![session.into()],
        }
        .into();
        assert_eq!(VgpuState::from_bytes(&state.to_bytes()), Ok(state));
    }
}

#[test]
fn empty_state_round_trips() {
    let state: VgpuState = VgpuStateV1 {
        profile: Profile::default(),
        device: DeviceIdentity::default(),
        sessions: vec![],
    }
    .into();
    assert_eq!(VgpuState::from_bytes(&state.to_bytes()), Ok(state.clone()));
    assert_eq!(state.version(), 1);
    assert!(state.streamed_buffers().is_empty());
}

#[test]
fn latest_gives_the_newest_form() {
    let state = rich_state();
    let latest = state.clone().latest();
    assert_eq!(latest.sessions.len(), 2);
    let first = latest.sessions[0].clone().latest();
    assert_eq!(first.id, 7);
    assert_eq!(state.profile(), &profile());
    assert_eq!(state.device(), &device("H200"));
}

#[test]
fn streamed_buffers_skip_sub_buffers() {
    let ids: Vec<_> = rich_state()
        .streamed_buffers()
        .iter()
        .map(|b| (b.session, b.buffer, b.size))
        .collect();
    assert_eq!(ids, vec![(7, 100, 3 * 4096 + 17), (7, 102, 10)]);
}

#[test]
fn unknown_state_versions_are_refused() {
    let mut bytes = rich_state().to_bytes();
    bytes[..4].copy_from_slice(&2u32.to_le_bytes());
    let err = VgpuState::from_bytes(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsupported vGPU state version 2 (this build reads 1..=1)"
    );
}

#[test]
fn binaries_run_only_on_the_same_device() {
    assert!(device("H200").binaries_run_on(&device("H200")));
    assert!(!device("H200").binaries_run_on(&device("H100")));
}

fn with_session(edit: impl FnOnce(&mut SessionStateV1)) -> VgpuState {
    let mut session = rich_session(7);
    edit(&mut session);
    VgpuStateV1 {
        profile: profile(),
        device: device("H200"),
        sessions: vec![session.into()],
    }
    .into()
}

#[test]
fn validate_refuses_inconsistent_states() {
    let cases: Vec<(VgpuState, &str)> = vec![
        (with_session(|s| s.id = 0), "session id 0 is reserved"),
        (
            with_session(|s| s.queues[1].id = 10),
            "session 7: queue id 10 is 0 or appears twice",
        ),
        (
            with_session(|s| s.kernels[1].guest = s.kernels[0].guest),
            "session 7: kernel handle 300 is 0 or appears twice",
        ),
        (
            with_session(|s| s.contexts[0].guest = Some(GuestRef { handle: 1, refs: 0 })),
            "session 7: context 1 has a guest handle but no references",
        ),
        (
            with_session(|s| s.queues[0].context = 9),
            "session 7: queue 10 refers to context 9, which the state lacks",
        ),
        (
            with_session(|s| s.kernels[0].args[2] = KernelArg::Buffer(999)),
            "session 7: kernel 300 refers to buffer 999, which the state lacks",
        ),
        (
            with_session(|s| s.kernels[0].args[5] = KernelArg::Sampler(1)),
            "session 7: kernel 300 refers to sampler 1, which the state lacks",
        ),
        (
            with_session(|s| s.kernels[1].program = 1),
            "session 7: kernel 301 refers to program 1, which the state lacks",
        ),
        (
            with_session(|s| s.buffers[2].size = 0),
            "session 7: buffer 102 has size 0",
        ),
        (
            with_session(|s| {
                s.buffers[1].parent = Some(SubRegion {
                    parent: 100,
                    origin: 12_000,
                })
            }),
            "session 7: sub-buffer 101 reaches past the end of its parent",
        ),
        (
            with_session(|s| {
                s.buffers[1].parent = Some(SubRegion {
                    parent: 101,
                    origin: 0,
                })
            }),
            "session 7: sub-buffer 101 has a sub-buffer as its parent",
        ),
        (
            with_session(|s| s.programs[3].origin = ProgramOrigin::Linked(vec![])),
            "session 7: program 203 is linked from no inputs",
        ),
        (
            with_session(|s| s.pending[0].queue = 12),
            "session 7: pending command 4151 refers to queue 12, which the state lacks",
        ),
    ];
    for (state, message) in cases {
        assert_eq!(state.validate().unwrap_err().to_string(), message);
    }
    let twice: VgpuState = VgpuStateV1 {
        profile: profile(),
        device: device("H200"),
        sessions: vec![rich_session(3).into(), rich_session(3).into()],
    }
    .into();
    assert_eq!(twice.validate(), Err(StateError::DuplicateSession(3)));
}

#[test]
fn nesting_of_linked_programs_is_bounded_on_decode() {
    let mut origin = ProgramOrigin::Source(b"x".to_vec());
    for _ in 0..20 {
        origin = ProgramOrigin::Linked(vec![LinkInput {
            origin,
            compile_options: vec![],
        }]);
    }
    let state = with_session(|s| s.programs[0].origin = origin);
    let err = VgpuState::from_bytes(&state.to_bytes()).unwrap_err();
    assert!(matches!(err, DecodeError::TooDeep { max: 8, .. }), "{err}");
}
