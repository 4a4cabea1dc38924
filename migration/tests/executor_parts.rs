//! Session state version 6: each executor's part in its own versioned type
//! and a table of the contents the stream carries; and the upgrade of every
//! earlier version (the previous build's fixture, incremental streams on
//! an old base) into it.

mod common;

use common::*;
use vgpu_migration::codec::{from_bytes, to_bytes, Encoder};
use vgpu_migration::*;

const FIXTURE: &[u8] = include_bytes!("fixtures/v1-rich.ckpt");

/// The state with every session upgraded to version 6.
fn upgraded(state: VgpuState) -> VgpuState {
    let mut state = state.latest();
    state.sessions = state
        .sessions
        .into_iter()
        .map(|s| SessionState::V6(s.latest()))
        .collect();
    state.into()
}

/// A CUDA part whose allocation id is an OpenCL buffer's id (100) in the
/// same session: executors number their objects on their own.
fn cuda_part() -> CudaSessionState {
    CudaSessionState {
        contexts: vec![CudaContextState {
            id: 1,
            guest: Some(GuestRef { handle: 1, refs: 1 }),
            flags: 0,
        }],
        allocations: vec![CudaAllocationState {
            id: 100,
            address: 0x2000_0000_0000,
            size: 4096,
        }],
        ..Default::default()
    }
}

/// The rich session's OpenCL objects and `cuda_part`, contents keyed 1, 2, 3.
fn two_part_session() -> SessionStateV6 {
    let mut session = SessionState::from(rich_session(7)).latest();
    session.parts.push(cuda_part().into());
    session.contents = vec![
        ContentState {
            key: 1,
            part: 0,
            object: 100,
            size: 3 * 4096 + 17,
        },
        ContentState {
            key: 2,
            part: 0,
            object: 102,
            size: 10,
        },
        ContentState {
            key: 3,
            part: 1,
            object: 100,
            size: 4096,
        },
    ];
    session
}

fn state_of(session: SessionStateV6) -> VgpuState {
    VgpuStateV1 {
        profile: profile(),
        device: device("H200"),
        sessions: vec![session.into()],
    }
    .into()
}

#[test]
fn the_previous_format_upgrades_into_parts_and_keeps_its_contents() {
    let old = read_all(FIXTURE).unwrap();
    let new = upgraded(old.state.clone());
    assert_eq!(new.validate(), Ok(()));
    assert_eq!(
        new.streamed_buffers(),
        old.state.streamed_buffers(),
        "keys are the old ids: the old chunks need no translation"
    );
    let VgpuState::V1(v) = &new;
    let SessionState::V6(rich) = &v.sessions[0] else {
        panic!("upgraded")
    };
    assert_eq!(rich.parts.len(), 1);
    assert_eq!(rich.parts[0].kind(), ExecutorKind::OpenCl);
    assert_eq!(rich.last_seq, None, "version 1 did not record it");
    let SessionState::V6(empty) = &v.sessions[1] else {
        panic!("upgraded")
    };
    assert!(empty.parts.is_empty() && empty.contents.is_empty());

    // Written in the new format, it reads back with the same contents.
    let rewritten = read_all(&write_stream(&new, 1000)).unwrap();
    assert_eq!(rewritten.state, new);
    assert_eq!(rewritten.buffers, old.buffers);
}

#[test]
fn every_earlier_session_version_upgrades_to_the_same_parts() {
    let SessionState::V1(v1) = SessionState::from(rich_session(7)) else {
        unreachable!()
    };
    let objects = SessionStateV2::from(v1.clone());
    let v3 = SessionState::V3(SessionStateV3 {
        objects: objects.clone(),
        last_seq: 9,
    });
    let v5 = SessionState::V5(SessionStateV5 {
        objects: objects.clone(),
        last_seq: 9,
        images: vec![],
        devices: DeviceTopology::default(),
    });
    let from_v1 = SessionState::V1(v1).latest();
    let from_v2 = SessionState::V2(objects).latest();
    let (from_v3, from_v5) = (v3.latest(), v5.latest());
    assert_eq!(from_v1, from_v2);
    assert_eq!(from_v3, from_v5);
    assert_eq!(
        SessionStateV6 {
            last_seq: None,
            ..from_v3
        },
        from_v1
    );
}

#[test]
fn parts_of_two_executors_round_trip_with_their_own_ids() {
    let state = state_of(two_part_session());
    assert_eq!(state.validate(), Ok(()));
    assert_eq!(VgpuState::from_bytes(&state.to_bytes()), Ok(state.clone()));
    let keys: Vec<_> = state
        .streamed_buffers()
        .iter()
        .map(|b| (b.buffer, b.size))
        .collect();
    assert_eq!(keys, vec![(1, 3 * 4096 + 17), (2, 10), (3, 4096)]);
    let read = read_all(&write_stream(&state, 4096)).unwrap();
    assert_eq!(read.state, state);
    assert_eq!(read.buffers[&(7, 3)], content(7, 3, 0, 4096));
}

#[test]
fn inconsistent_parts_are_refused() {
    let check = |edit: &dyn Fn(&mut SessionStateV6)| {
        let mut session = two_part_session();
        edit(&mut session);
        state_of(session).validate().map_err(|e| e.to_string())
    };
    type Edit<'a> = &'a dyn Fn(&mut SessionStateV6);
    let cases: Vec<(Edit, &str)> = vec![
        (
            &|s| s.parts.push(cuda_part().into()),
            "session 7 has two CUDA parts",
        ),
        (
            &|s| s.contents[2].size = 4095,
            "session 7: contents 3 name object 100 of part 1, which carries no contents of that size",
        ),
        (
            &|s| s.contents[2].part = 2,
            "session 7: contents 3 name object 100 of part 2, which carries no contents of that size",
        ),
        (
            &|s| s.contents[1] = s.contents[0].clone(),
            "session 7: streamed contents id 1 is 0 or names two buffers",
        ),
        (
            &|s| {
                s.contents[1].key = 4;
                s.contents[1].object = 100;
                s.contents[1].size = 3 * 4096 + 17;
            },
            "session 7: contents 4 name object 100 of part 0, which carries no contents of that size",
        ),
        (
            &|s| {
                s.contents.pop();
            },
            "session 7: object 100 of part 1 has no contents in the stream, or twice",
        ),
        (
            &|s| s.contents[0].key = 0,
            "session 7: streamed contents id 0 is 0 or names two buffers",
        ),
        (
            &|s| {
                let ExecutorState::Cuda(CudaState::V2(c)) = &mut s.parts[1] else {
                    unreachable!()
                };
                c.allocations[0].size = 0;
            },
            "session 7: CUDA allocation at 0x200000000000 of 0 bytes is empty",
        ),
    ];
    for (edit, message) in cases {
        assert_eq!(check(edit), Err(message.to_string()));
    }
}

#[test]
fn unknown_executor_kinds_and_versions_are_refused() {
    let part = ExecutorState::from(cuda_part());
    let bytes = to_bytes(&part);
    assert_eq!(from_bytes::<ExecutorState>(&bytes), Ok(part));
    let mut kind = bytes.clone();
    kind[..4].copy_from_slice(&3u32.to_le_bytes());
    assert!(matches!(
        from_bytes::<ExecutorState>(&kind),
        Err(codec::DecodeError::BadTag {
            what: "executor kind",
            tag: 3,
            ..
        })
    ));
    let mut e = Encoder::new();
    e.u32(1);
    e.u32(OPENCL_STATE_VERSION + 1);
    assert_eq!(
        from_bytes::<ExecutorState>(&e.into_bytes())
            .unwrap_err()
            .to_string(),
        format!(
            "unsupported OpenCL state version {} (this build reads 1..={OPENCL_STATE_VERSION})",
            OPENCL_STATE_VERSION + 1
        )
    );
}

#[test]
fn a_new_format_delta_merges_with_a_base_of_the_previous_format() {
    let sizes = [100u64, 50];
    let old = buffers_state(&sizes);
    let mut base = StreamWriter::with_identity(Vec::new(), BaseId(77)).unwrap();
    base.write_state(&old).unwrap();
    for (i, size) in sizes.iter().enumerate() {
        let id = i as u64 + 1;
        base.write_buffer_chunk(1, id, 0, &content(1, id, 0, *size as usize))
            .unwrap();
    }
    let base = base.finish().unwrap().0;

    // The delta describes the same objects in version 6: buffer 2 changed,
    // buffer 1 as in the base.
    let new = upgraded(old);
    let mut delta = StreamWriter::new_incremental(Vec::new(), BaseId(77), "base").unwrap();
    delta.write_state(&new).unwrap();
    delta
        .write_buffer_chunk(1, 2, 0, &content(9, 2, 0, 50))
        .unwrap();
    delta.write_base_ref(1, 1, 1, 1).unwrap();
    let delta = delta.finish().unwrap().0;

    let (merged, _) = merge(base.as_slice(), delta.as_slice(), Vec::new()).unwrap();
    let read = read_all(&merged).unwrap();
    assert_eq!(read.state, new);
    assert_eq!(read.buffers[&(1, 1)], content(1, 1, 0, 100));
    assert_eq!(read.buffers[&(1, 2)], content(9, 2, 0, 50));
}
