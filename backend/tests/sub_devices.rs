//! Sub-devices against the real daemon on PoCL: a kernel on each half of
//! the device, the same after a checkpoint and restart; forged sub-device
//! handles, absurd partitions and the object quota give errors.

mod common;

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, InfoTarget, Request, Status};

const N: u64 = 256;
const EQUALLY: u64 = 0x1086;
const BY_COUNTS: u64 = 0x1087;
const SOURCE: &[u8] = b"kernel void k(global int *out, int scale) {
    int i = get_global_id(0);
    out[i] = i * scale + 7;
}";
/// Sub-device handles the guest chooses.
const SUBS: [u64; 2] = [100, 101];

fn device_info(handle: u64, param: u32) -> Request {
    GetInfo {
        target: InfoTarget::Device as u32,
        handle,
        index: 0,
        param,
    }
    .into()
}

fn value_arg(index: u32, value: i32) -> Request {
    SetKernelArg {
        kernel: 4,
        index,
        arg_kind: ArgKind::Value as u32,
        size: 4,
        value: value.to_le_bytes().to_vec(),
        handle: 0,
    }
    .into()
}

fn mem_arg(index: u32, mem: u64) -> Request {
    SetKernelArg {
        kernel: 4,
        index,
        arg_kind: ArgKind::Mem as u32,
        size: 8,
        value: vec![],
        handle: mem,
    }
    .into()
}

/// Two sub-devices (equally, one compute unit each), a context on both,
/// queue 2 on the first and 3 on the second, a program built for both.
fn setup(raw: &mut RawFrontend) {
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[CreateSubDevices {
            parent: 0,
            properties: vec![EQUALLY, 1, 0],
            devices: SUBS.to_vec(),
        }
        .into()],
    );
    req::assert_all_ok(&reply);
    assert_eq!(reply.records[0].payload, 2u32.to_le_bytes(), "two halves");
    let mut requests: Vec<Request> = vec![
        CreateContextOnDevices {
            context: 1,
            properties: vec![],
            devices: SUBS.to_vec(),
        }
        .into(),
        CreateQueueOnDevice {
            queue: 2,
            context: 1,
            device: SUBS[0],
            properties: vec![],
        }
        .into(),
        CreateQueueOnDevice {
            queue: 3,
            context: 1,
            device: SUBS[1],
            properties: vec![],
        }
        .into(),
        req::program(3, 1, SOURCE),
        req::build(3),
        req::kernel(4, 3, b"k"),
    ];
    for mem in [10, 11] {
        requests.push(req::buffer(mem, 1, 1, N * 4));
    }
    // The guest releases its sub-device handles: the context and queues
    // keep the sub-devices alive, and a checkpoint must save them anyway.
    requests.push(
        Release {
            kind: vgpu_protocol::ObjectKind::Device as u32,
            handle: SUBS[1],
        }
        .into(),
    );
    req::assert_all_ok(&raw.batch(1, &requests));
}

/// Runs the kernel on each sub-device's queue (scale 3 into buffer 10,
/// scale 5 into 11) and reads both buffers back; also the sub-device's
/// compute units and partition type.
fn observe(raw: &mut RawFrontend) -> (Vec<u8>, Vec<u8>, Vec<Vec<u8>>) {
    let mut outputs = Vec::new();
    for (queue, mem, scale) in [(2, 10, 3), (3, 11, 5)] {
        req::assert_all_ok(
            &raw.batch(
                1,
                &[
                    mem_arg(0, mem),
                    value_arg(1, scale),
                    EnqueueNdRange {
                        queue,
                        kernel: 4,
                        work_dim: 1,
                        offset: [0; 3],
                        global: [N, 1, 1],
                        local: [0; 3],
                        wait: vec![],
                        event: 0,
                    }
                    .into(),
                    Finish { queue }.into(),
                ],
            ),
        );
        let read = EnqueueReadBuffer {
            queue,
            mem,
            offset: 0,
            data: DataRef {
                offset: 0,
                len: N * 4,
            },
            wait: vec![],
            event: 0,
        };
        let (reply, data) = raw.batch_with_in(1, &[read.into()], (N * 4) as u32);
        req::assert_all_ok(&reply);
        outputs.push(data);
    }
    let reply = raw.batch(
        1,
        &[
            device_info(SUBS[0], 0x1002), // CL_DEVICE_MAX_COMPUTE_UNITS
            device_info(SUBS[0], 0x1046), // CL_DEVICE_PARTITION_TYPE
        ],
    );
    req::assert_all_ok(&reply);
    let infos = reply.records.iter().map(|r| r.payload.clone()).collect();
    let second = outputs.pop().expect("two outputs");
    (outputs.pop().expect("two outputs"), second, infos)
}

fn expected(scale: i32) -> Vec<u8> {
    (0..N as i32)
        .flat_map(|i| (i * scale + 7).to_le_bytes())
        .collect()
}

#[test]
fn a_kernel_runs_on_each_sub_device_and_again_after_a_restart() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    let before = observe(&mut raw);
    assert!(before.0 == expected(3), "first sub-device's result");
    assert!(before.1 == expected(5), "second sub-device's result");
    assert_eq!(before.2[0], 1u32.to_le_bytes(), "one compute unit each");
    let file = std::env::temp_dir().join(format!("vgpu-subdev-{}.ckpt", std::process::id()));
    let (ok, out) = backend.ctl(&["checkpoint", file.to_str().unwrap(), "--then", "pause"]);
    assert!(ok, "checkpoint failed: {out}");
    let next_seq = raw.next_seq;
    drop(raw);
    drop(backend);
    let restarted = Backend::start_with(&["--restore", file.to_str().unwrap()], &[]);
    let mut raw = restarted.raw();
    raw.next_seq = next_seq;
    let after = observe(&mut raw);
    // The released sub-device is not the guest's any more; the held one is.
    let reply = raw.batch(1, &[device_info(SUBS[1], 0x1002)]);
    let _ = std::fs::remove_file(&file);
    assert!(after == before, "results differ after the restart");
    assert_eq!(reply.records[0].status, Status::INVALID_DEVICE);
    let status = restarted.status();
    assert_eq!(status["vms"][0]["sessions"], 1, "{status}");
}

#[test]
fn forged_handles_and_absurd_partitions_get_errors() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut huge_counts = vec![BY_COUNTS];
    huge_counts.extend(std::iter::repeat_n(1, 1000));
    huge_counts.extend([0, 0]);
    let requests: Vec<Request> = vec![
        // Never created.
        device_info(999, 0x1002),
        CreateSubDevices {
            parent: 999,
            properties: vec![EQUALLY, 1, 0],
            devices: vec![5],
        }
        .into(),
        CreateContextOnDevices {
            context: 1,
            properties: vec![],
            devices: vec![999],
        }
        .into(),
        // 2^31 parts, and 2^31 compute units each.
        CreateSubDevices {
            parent: 0,
            properties: vec![BY_COUNTS, 1 << 31, 0, 0],
            devices: vec![],
        }
        .into(),
        CreateSubDevices {
            parent: 0,
            properties: vec![EQUALLY, 1 << 31, 0],
            devices: vec![],
        }
        .into(),
        CreateSubDevices {
            parent: 0,
            properties: huge_counts,
            devices: vec![],
        }
        .into(),
        // No terminator, an unknown scheme.
        CreateSubDevices {
            parent: 0,
            properties: vec![EQUALLY, 1],
            devices: vec![],
        }
        .into(),
        CreateSubDevices {
            parent: 0,
            properties: vec![0x4242, 1, 0],
            devices: vec![],
        }
        .into(),
        // Fewer handles than the partition yields: nothing is kept.
        CreateSubDevices {
            parent: 0,
            properties: vec![EQUALLY, 1, 0],
            devices: vec![7],
        }
        .into(),
        device_info(7, 0x1002),
        // A queue on a device the context does not have.
        req::context(2),
        CreateSubDevices {
            parent: 0,
            properties: vec![EQUALLY, 1, 0],
            devices: vec![8, 9],
        }
        .into(),
        CreateQueueOnDevice {
            queue: 3,
            context: 2,
            device: 8,
            properties: vec![],
        }
        .into(),
    ];
    let reply = raw.batch(1, &requests);
    let statuses: Vec<Status> = reply.records.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            Status::INVALID_DEVICE,
            Status::INVALID_DEVICE,
            Status::INVALID_DEVICE,
            Status::INVALID_DEVICE_PARTITION_COUNT,
            Status::INVALID_VALUE,
            Status::INVALID_DEVICE_PARTITION_COUNT,
            Status::INVALID_VALUE,
            Status::INVALID_VALUE,
            Status::INVALID_VALUE,
            Status::INVALID_DEVICE,
            Status::SUCCESS,
            Status::SUCCESS,
            Status::INVALID_DEVICE,
        ]
    );
    // The daemon is still serving.
    req::assert_all_ok(&raw.batch(1, &[device_info(8, 0x1002)]));
}

#[test]
fn sub_devices_count_against_the_object_quota() {
    let backend = Backend::start_with(&["--max-objects", "3"], &[]);
    let mut raw = backend.raw();
    raw.open_session(1);
    let partition = |first: u64| -> Request {
        CreateSubDevices {
            parent: 0,
            properties: vec![EQUALLY, 1, 0],
            devices: vec![first, first + 1],
        }
        .into()
    };
    let reply = raw.batch(1, &[partition(10), partition(20), device_info(20, 0x1002)]);
    let statuses: Vec<Status> = reply.records.iter().map(|r| r.status).collect();
    // Two fit; the next two do not, and none of them is kept.
    assert!(statuses[0].is_success(), "{reply:?}");
    assert!(!statuses[1].is_success(), "{reply:?}");
    assert_eq!(statuses[2], Status::INVALID_DEVICE);
}

#[test]
fn a_rehome_to_a_device_that_cannot_partition_so_is_refused_and_changes_nothing() {
    // PoCL's basic device has one compute unit and no partition scheme.
    let env = [("POCL_DEVICES", "pthread basic")];
    let backend = Backend::start_with(&["--device", "opencl:pthread"], &env);
    let mut raw = backend.raw();
    setup(&mut raw);
    let before = observe(&mut raw);
    let (ok, out) = backend.ctl(&["rehome", "--device", "opencl:basic"]);
    assert!(
        !ok,
        "re-homed sub-devices onto a device without them: {out}"
    );
    // The profile check refuses it before anything moves.
    assert!(
        out.contains("cannot partition equally, which the guest saw it could"),
        "{out}"
    );
    // Still on the first device, with the same objects.
    let after = observe(&mut raw);
    assert!(after == before, "results differ after the refused re-home");
}

#[test]
fn a_profile_without_partitions_offers_none_and_refuses_vgpus_that_saw_them() {
    let dir = std::env::temp_dir().join(format!("vgpu-nopart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let own = dir.join("own.prof");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
        .arg("--write-profile")
        .arg(&own)
        .status()
        .unwrap();
    assert!(status.success());
    let mut plain = vgpu_migration::Profile::from_bytes(&std::fs::read(&own).unwrap()).unwrap();
    assert_eq!(plain.partition_properties, [EQUALLY, BY_COUNTS], "PoCL's");
    plain.partition_properties.clear();
    let plain_path = dir.join("plain.prof");
    std::fs::write(&plain_path, plain.to_bytes()).unwrap();

    let partitioned = Backend::start();
    let mut raw = partitioned.raw();
    setup(&mut raw);
    let file = dir.join("partitioned.ckpt");
    let (ok, out) = partitioned.ctl(&["checkpoint", file.to_str().unwrap()]);
    assert!(ok, "{out}");

    let without = Backend::start_with(&["--profile", plain_path.to_str().unwrap()], &[]);
    let mut guest = without.raw();
    guest.open_session(3);
    let reply = guest.batch(
        3,
        &[
            device_info(0, 0x1044), // CL_DEVICE_PARTITION_PROPERTIES
            device_info(0, 0x1043), // CL_DEVICE_PARTITION_MAX_SUB_DEVICES
            CreateSubDevices {
                parent: 0,
                properties: vec![EQUALLY, 1, 0],
                devices: vec![5, 6],
            }
            .into(),
        ],
    );
    assert_eq!(reply.records[0].payload, 0u64.to_le_bytes(), "no scheme");
    assert_eq!(
        reply.records[1].payload,
        0u32.to_le_bytes(),
        "no sub-devices"
    );
    assert_eq!(reply.records[2].status, Status::INVALID_VALUE);
    // The vGPU that saw partitions is refused by the profile check, which
    // names the schemes missing.
    let (ok, out) = without.ctl(&["restore", file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !ok && out.contains("cannot partition equally") && out.contains("by counts"),
        "{out}"
    );
}
