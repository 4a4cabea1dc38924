//! Each executor's save and restore, in crosvm's `suspendable_tests!`
//! shape: snapshot, change, restore, snapshot again; the two snapshots
//! (state and every content) must be equal, and the restored objects must
//! compute. Real devices only: OpenCL on PoCL; CUDA where a GPU answers.

mod common;

use common::req;
use vgpu_backend::harness::{InProcess, Snapshot};
use vgpu_protocol::frame::BatchBuilder;
use vgpu_protocol::messages::*;
use vgpu_protocol::{decode_reply, ArgKind, DataRef, ObjectKind, Request};

/// Runs `requests` as one batch with `out_data` and `in_len` bytes of
/// in-data; fails the test unless every call succeeded.
fn run(
    harness: &mut InProcess,
    seq: &mut u64,
    requests: Vec<Request>,
    out_data: &[u8],
    in_len: usize,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0);
    for request in &requests {
        *seq += 1;
        builder.push(*seq, request);
    }
    let (reply, data) = harness.run(&builder.finish(1, 1 << 16), out_data, in_len);
    let reply = decode_reply(&reply).expect("a reply");
    assert!(
        reply.status.is_success() && reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    data
}

/// PoCL's device enumeration crashes when two threads of one process run
/// it at once (seen here: a SIGSEGV in `clGetDeviceInfo` under
/// `OpenClExecutor::open`); the daemon opens its device once per worker
/// process, so only tests that share a process take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const KERNEL: &str = "kernel void inc(global int *a) { a[get_global_id(0)] += 1; }";
const INTS: usize = 16;

fn ints(data: &[u8]) -> Vec<i32> {
    data.chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

fn bytes(values: impl Iterator<Item = i32>) -> Vec<u8> {
    values.flat_map(i32::to_le_bytes).collect()
}

/// A context, a queue, a buffer with a sub-buffer, a built program, a
/// kernel with its argument set, an unset user event; the kernel has run
/// once on the buffer.
fn set_up(harness: &mut InProcess, seq: &mut u64) {
    let init = bytes(0..INTS as i32);
    let size = init.len() as u64;
    let requests = vec![
        req::context(1),
        req::queue(2, 1),
        CreateBuffer {
            mem: 3,
            context: 1,
            flags: 1,
            size,
            init: DataRef {
                offset: 0,
                len: size,
            },
        }
        .into(),
        CreateSubBuffer {
            mem: 7,
            parent: 3,
            flags: 1,
            origin: 0,
            size: 16,
        }
        .into(),
        req::program(4, 1, KERNEL.as_bytes()),
        req::build(4),
        req::kernel(5, 4, b"inc"),
        SetKernelArg {
            kernel: 5,
            index: 0,
            arg_kind: ArgKind::Mem as u32,
            size: 8,
            value: vec![],
            handle: 3,
        }
        .into(),
        CreateUserEvent {
            event: 6,
            context: 1,
        }
        .into(),
    ];
    run(harness, seq, requests, &init, 0);
    launch(harness, seq);
}

fn launch(harness: &mut InProcess, seq: &mut u64) {
    let requests = vec![
        EnqueueNdRange {
            queue: 2,
            kernel: 5,
            work_dim: 1,
            offset: [0; 3],
            global: [INTS as u64, 1, 1],
            local: [0; 3],
            wait: vec![],
            event: 0,
        }
        .into(),
        Finish { queue: 2 }.into(),
    ];
    run(harness, seq, requests, &[], 0);
}

fn read_buffer(harness: &mut InProcess, seq: &mut u64) -> Vec<i32> {
    let len = (INTS * 4) as u64;
    let requests = vec![EnqueueReadBuffer {
        queue: 2,
        mem: 3,
        offset: 0,
        data: DataRef { offset: 0, len },
        wait: vec![],
        event: 0,
    }
    .into()];
    ints(&run(harness, seq, requests, &[], len as usize))
}

/// New contents, a new buffer, the kernel released, the user event set.
fn change(harness: &mut InProcess, seq: &mut u64) {
    let data = bytes((0..INTS as i32).map(|i| 1000 - i));
    let len = data.len() as u64;
    let requests = vec![
        EnqueueWriteBuffer {
            queue: 2,
            mem: 3,
            offset: 0,
            data: DataRef { offset: 0, len },
            wait: vec![],
            event: 0,
        }
        .into(),
        CreateBuffer {
            mem: 8,
            context: 1,
            flags: 1,
            size: 32,
            init: DataRef { offset: 0, len: 0 },
        }
        .into(),
        Release {
            kind: ObjectKind::Kernel as u32,
            handle: 5,
        }
        .into(),
        SetUserEventStatus {
            event: 6,
            status: 0,
        }
        .into(),
        Finish { queue: 2 }.into(),
    ];
    run(harness, seq, requests, &data, 0);
}

/// The in-process vGPU on OpenCL with [`set_up`]'s objects, holding the
/// one-at-a-time turn; `None` without a device.
fn set_up_alone() -> Option<(std::sync::MutexGuard<'static, ()>, InProcess, u64)> {
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut harness = InProcess::opencl()?;
    let mut seq = 0;
    set_up(&mut harness, &mut seq);
    Some((turn, harness, seq))
}

fn snapshot(harness: &mut InProcess) -> Snapshot {
    harness.snapshot().expect("the session saves")
}

#[test]
fn opencl_snapshot_change_restore_snapshot_gives_the_same_state() {
    let Some((_turn, mut harness, mut seq)) = set_up_alone() else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    let before = snapshot(&mut harness);
    assert_eq!(before.0.parts.len(), 1, "one OpenCL part: {:?}", before.0);
    assert_eq!(
        ints(&before.1[0].1),
        (1..=INTS as i32).collect::<Vec<_>>(),
        "the saved contents are the buffer's"
    );

    change(&mut harness, &mut seq);
    let changed = snapshot(&mut harness);
    assert_ne!(changed.0, before.0, "the change shows in the state");
    assert_ne!(changed.1, before.1, "and in the contents");

    harness.restore(&before).expect("the session restores");
    let after = snapshot(&mut harness);
    assert_eq!(after.0, before.0, "the state round-trips");
    assert_eq!(after.1, before.1, "the contents round-trip");

    // The restored objects compute: the kernel, its argument and the
    // buffer's contents are those of the first snapshot.
    launch(&mut harness, &mut seq);
    assert_eq!(
        read_buffer(&mut harness, &mut seq),
        (2..=INTS as i32 + 1).collect::<Vec<_>>()
    );
}

#[test]
fn a_part_no_executor_here_can_take_is_refused_and_nothing_changes() {
    use vgpu_backend::executor::opencl::{DeviceSelector, OpenClExecutor};
    use vgpu_backend::executor::{Executor, SnapshotError};
    use vgpu_migration::{CudaContextState, CudaSessionState, ExecutorKind, ExecutorState};
    let Some((_turn, mut harness, mut seq)) = set_up_alone() else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    let (mut state, contents) = snapshot(&mut harness);
    let cuda: ExecutorState = CudaSessionState {
        contexts: vec![CudaContextState {
            id: 1,
            guest: Some(vgpu_migration::GuestRef { handle: 1, refs: 1 }),
            flags: 0,
        }],
        ..Default::default()
    }
    .into();
    state.parts.push(cuda.clone());
    assert!(matches!(
        harness.restore(&(state, contents)),
        Err(vgpu_backend::persist::Error::NoExecutor {
            kind: ExecutorKind::Cuda
        })
    ));
    // The session is as it was.
    launch(&mut harness, &mut seq);
    assert_eq!(
        read_buffer(&mut harness, &mut seq),
        (2..=INTS as i32 + 1).collect::<Vec<_>>()
    );

    // An executor handed a part of another kind refuses it.
    let opencl = OpenClExecutor::open(&DeviceSelector::First).expect("the device above");
    assert!(matches!(
        opencl.restore_session(&cuda),
        Err(SnapshotError::WrongKind {
            given: ExecutorKind::Cuda,
            here: ExecutorKind::OpenCl
        })
    ));
}
