//! The in-process harness fuzzers use: real decode, dispatch and PoCL.

use vgpu_backend::harness::InProcess;
use vgpu_protocol::frame::BatchBuilder;
use vgpu_protocol::messages::*;
use vgpu_protocol::{decode_reply, DataRef, ObjectKind};

#[test]
fn harness_runs_valid_and_garbage_batches() {
    let Some(mut harness) = InProcess::opencl() else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    let mut builder = BatchBuilder::new(0);
    builder.push(
        1,
        &CreateContext {
            context: 1,
            properties: vec![],
        }
        .into(),
    );
    builder.push(
        2,
        &CreateBuffer {
            mem: 2,
            context: 1,
            flags: 1,
            size: 16,
            init: DataRef { offset: 0, len: 16 },
        }
        .into(),
    );
    let request = builder.finish(1, 4096);
    let (reply, _) = harness.run(&request, &[7u8; 16], 0);
    let reply = decode_reply(&reply).unwrap();
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    assert_eq!(harness.object_counts()[ObjectKind::Mem.index()], 1);
    for garbage in [&b""[..], &b"VGPU"[..], &request[..40], &[0xff; 200][..]] {
        let (reply, _) = harness.run(garbage, &[], 0);
        assert!(decode_reply(&reply).is_ok_and(|r| !r.status.is_success()));
    }
}
