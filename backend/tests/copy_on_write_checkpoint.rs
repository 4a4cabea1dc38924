//! A checkpoint taken while the guest keeps rewriting every buffer, each
//! step by another kind of command (a transfer, kernels, a fill), holds
//! one step of the run exactly: the contents of every buffer at the
//! pause, none of the writes after it, though the buffers are read after
//! the guest resumed (copy-on-write). Through the real daemon, PoCL and
//! `vgpu-ctl`.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, Request};

const INTS: usize = 1 << 19;
const SIZE: u64 = (INTS * 4) as u64;
/// Buffer handles: 10 written by a transfer, 11..=16 by kernels, 17 by a
/// fill.
const BUFFERS: std::ops::RangeInclusive<u64> = 10..=17;
const SOURCE: &[u8] = b"kernel void stamp(global uint* a, uint step, uint which) {
    uint i = (uint)get_global_id(0);
    a[i] = step * 0x9E3779B1u + which * 0x85EBCA77u + i;
}";

/// What step `step` leaves in buffer `mem`.
fn contents(step: u32, mem: u64) -> Vec<u8> {
    if mem == 17 {
        return step.to_le_bytes().repeat(INTS);
    }
    let which = mem as u32;
    (0..INTS as u32)
        .flat_map(|i| {
            step.wrapping_mul(0x9E37_79B1)
                .wrapping_add(which.wrapping_mul(0x85EB_CA77))
                .wrapping_add(i)
                .to_le_bytes()
        })
        .collect()
}

fn set_up(raw: &mut RawFrontend) {
    raw.open_session(1);
    let mut requests = req::kernel_setup(SOURCE, b"stamp");
    requests.extend(BUFFERS.map(|mem| req::buffer(mem, 1, 1, SIZE)));
    req::assert_all_ok(&raw.batch(1, &requests));
}

fn value_arg(index: u32, v: u32) -> Request {
    SetKernelArg {
        kernel: 4,
        index,
        arg_kind: ArgKind::Value as u32,
        size: 4,
        value: v.to_le_bytes().to_vec(),
        handle: 0,
    }
    .into()
}

/// The buffer step `step` rewrites: each in turn, so the guest rewrites
/// one buffer per batch, many times while a checkpoint is written.
fn rewritten_by(step: u32) -> u64 {
    BUFFERS.start() + u64::from(step) % 8
}

/// Stamps buffer `rewritten_by(step)` with `step` in one batch (a pause
/// falls between batches, never inside one), and waits for it.
fn step(raw: &mut RawFrontend, step: u32) {
    let mem = rewritten_by(step);
    let finish: Request = Finish { queue: 2 }.into();
    let reply = match mem {
        10 => {
            let write = EnqueueWriteBuffer {
                queue: 2,
                mem,
                offset: 0,
                data: DataRef {
                    offset: 0,
                    len: SIZE,
                },
                wait: vec![],
                event: 0,
            };
            raw.batch_with_out(1, &[write.into(), finish], &contents(step, mem))
        }
        17 => {
            let fill = EnqueueFillBuffer {
                queue: 2,
                mem,
                pattern: step.to_le_bytes().to_vec(),
                offset: 0,
                size: SIZE,
                wait: vec![],
                event: 0,
            };
            raw.batch(1, &[fill.into(), finish])
        }
        _ => {
            let buffer = SetKernelArg {
                kernel: 4,
                index: 0,
                arg_kind: ArgKind::Mem as u32,
                size: 8,
                value: vec![],
                handle: mem,
            };
            let launch = EnqueueNdRange {
                queue: 2,
                kernel: 4,
                work_dim: 1,
                offset: [0; 3],
                global: [INTS as u64, 1, 1],
                local: [0; 3],
                wait: vec![],
                event: 0,
            };
            let requests = [
                buffer.into(),
                value_arg(1, step),
                value_arg(2, mem as u32),
                launch.into(),
                finish,
            ];
            raw.batch(1, &requests)
        }
    };
    req::assert_all_ok(&reply);
}

/// What each buffer holds after steps `0..=last`.
fn after(last: u32) -> Vec<(u64, Vec<u8>)> {
    BUFFERS
        .map(|mem| {
            let behind = (last + 8 - (mem - BUFFERS.start()) as u32) % 8;
            (mem, contents(last - behind, mem))
        })
        .collect()
}

fn read(raw: &mut RawFrontend, mem: u64) -> Vec<u8> {
    let read: Request = EnqueueReadBuffer {
        queue: 2,
        mem,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: SIZE,
        },
        wait: vec![],
        event: 0,
    }
    .into();
    let (reply, data) = raw.batch_with_in(1, &[read], SIZE as u32);
    req::assert_all_ok(&reply);
    data
}

#[test]
fn a_checkpoint_of_a_guest_rewriting_every_buffer_holds_exactly_one_step() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    set_up(&mut raw);
    for k in 0..8 {
        step(&mut raw, k);
    }
    let done = Arc::new(AtomicU32::new(8));
    let stop = Arc::new(AtomicBool::new(false));
    let guest = {
        let (done, stop) = (done.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 8;
            while !stop.load(Ordering::SeqCst) {
                step(&mut raw, k);
                k += 1;
                done.store(k, Ordering::SeqCst);
            }
            raw
        })
    };
    let file = backend.dir().join("cow.ckpt");
    // No copy rounds: every buffer is owed at the pause and read after
    // it, while the guest goes on rewriting them in turn.
    let from = done.load(Ordering::SeqCst);
    let (ok, out) = backend.ctl(&["checkpoint", file.to_str().unwrap(), "--copy-on-write"]);
    let to = done.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let mut raw = guest.join().expect("guest thread");
    assert!(ok, "checkpoint failed: {out}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON report");
    eprintln!("copy-on-write checkpoint while the guest ran steps {from}..{to}: {report}");
    assert_eq!(report["buffer_bytes"], 8 * SIZE, "{report}");
    assert_eq!(
        report["paused_bytes"], 0,
        "nothing is read in the pause: {report}"
    );
    assert_eq!(
        report["owed_bytes"],
        8 * SIZE,
        "everything is owed: {report}"
    );
    assert_eq!(report["rounds"], 0, "{report}");
    let ran = done.load(Ordering::SeqCst);
    for (mem, expected) in after(ran - 1) {
        assert!(
            read(&mut raw, mem) == expected,
            "the guest's writes to {mem} went through"
        );
    }

    let (ok, out) = backend.ctl(&["restore", file.to_str().unwrap()]);
    assert!(ok, "restore failed: {out}");
    let restored: Vec<(u64, Vec<u8>)> = BUFFERS.map(|mem| (mem, read(&mut raw, mem))).collect();
    let at = (7..ran).find(|last| after(*last) == restored);
    assert!(
        at.is_some(),
        "the checkpoint is no moment of the run between two steps: it mixes moments"
    );

    // An incremental one owes what it writes the same way, and restores
    // with its base to the moment it was taken.
    let at = at.expect("checked above");
    step(&mut raw, at + 1);
    let delta = backend.dir().join("cow.d1");
    let (ok, out) = backend.ctl(&[
        "checkpoint",
        delta.to_str().unwrap(),
        "--copy-on-write",
        "--incremental",
        file.to_str().unwrap(),
    ]);
    assert!(ok, "incremental checkpoint failed: {out}");
    step(&mut raw, at + 2);
    let (ok, out) = backend.ctl(&[
        "restore",
        delta.to_str().unwrap(),
        "--base",
        file.to_str().unwrap(),
    ]);
    assert!(ok, "restore with the base failed: {out}");
    let restored: Vec<(u64, Vec<u8>)> = BUFFERS.map(|mem| (mem, read(&mut raw, mem))).collect();
    assert!(
        restored == after(at + 1),
        "the incremental checkpoint is not the moment it was taken"
    );
}
