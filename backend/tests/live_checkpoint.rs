//! Checkpoints taken while the guest keeps computing: buffer contents are
//! copied in rounds as it runs, and the pause reads only what was written
//! since. Through the real daemon, its control socket and `vgpu-ctl`.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, Request};

const N: usize = 1 << 19;
const SIZE: u64 = (N * 4) as u64;
const CL_MEM_READ_WRITE: u64 = 1;
const CL_MEM_READ_ONLY: u64 = 1 << 2;
const SOURCE: &[u8] = b"kernel void advance(global uint* a, global const uint* b, uint k) {
    size_t i = get_global_id(0);
    a[i] = a[i] * 3u + b[i] + k;
}";

fn initial(seed: u32) -> Vec<u32> {
    (0..N as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed))
        .collect()
}

fn bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn buffer(mem: u64, flags: u64) -> Request {
    req::buffer(mem, 1, flags, SIZE)
}

fn mem_arg(index: u32, handle: u64) -> Request {
    SetKernelArg {
        kernel: 4,
        index,
        arg_kind: ArgKind::Mem as u32,
        size: 8,
        value: vec![],
        handle,
    }
    .into()
}

/// Session 1: `a` (read-write, the kernel's output) and `b` (read-only).
fn setup(raw: &mut RawFrontend) {
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            req::program(3, 1, SOURCE),
            req::build(3),
            req::kernel(4, 3, b"advance"),
            buffer(5, CL_MEM_READ_WRITE),
            buffer(6, CL_MEM_READ_ONLY),
            mem_arg(0, 5),
            mem_arg(1, 6),
        ],
    );
    req::assert_all_ok(&reply);
    for (mem, seed) in [(5u64, 1u32), (6u64, 2u32)] {
        write(raw, mem, &bytes(&initial(seed)));
    }
}

fn write(raw: &mut RawFrontend, mem: u64, data: &[u8]) {
    let write = EnqueueWriteBuffer {
        queue: 2,
        mem,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: data.len() as u64,
        },
        wait: vec![],
        event: 0,
    };
    req::assert_all_ok(&raw.batch_with_out(1, &[write.into()], data));
}

/// Runs step `k` and waits for it.
fn step(raw: &mut RawFrontend, k: u32) {
    let requests: Vec<Request> = vec![
        SetKernelArg {
            kernel: 4,
            index: 2,
            arg_kind: ArgKind::Value as u32,
            size: 4,
            value: k.to_le_bytes().to_vec(),
            handle: 0,
        }
        .into(),
        EnqueueNdRange {
            queue: 2,
            kernel: 4,
            work_dim: 1,
            offset: [0; 3],
            global: [N as u64, 1, 1],
            local: [0; 3],
            wait: vec![],
            event: 0,
        }
        .into(),
        Finish { queue: 2 }.into(),
    ];
    req::assert_all_ok(&raw.batch(1, &requests));
}

fn read_a(raw: &mut RawFrontend) -> Vec<u8> {
    let read = EnqueueReadBuffer {
        queue: 2,
        mem: 5,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: SIZE,
        },
        wait: vec![],
        event: 0,
    };
    let (reply, data) = raw.batch_with_in(1, &[read.into()], SIZE as u32);
    req::assert_all_ok(&reply);
    data
}

/// The step count whose CPU reference equals `a`, if any of `0..=most`.
fn steps_matching(a: &[u8], most: u32) -> Option<u32> {
    let (mut x, y) = (initial(1), initial(2));
    for k in 0..=most {
        if bytes(&x) == a {
            return Some(k);
        }
        for (x, y) in x.iter_mut().zip(&y) {
            *x = x.wrapping_mul(3).wrapping_add(*y).wrapping_add(k);
        }
    }
    None
}

fn checkpoint(backend: &Backend, file: &std::path::Path, rounds: &str) -> serde_json::Value {
    let (ok, out) = backend.ctl(&["checkpoint", file.to_str().unwrap(), "--rounds", rounds]);
    assert!(ok, "checkpoint failed: {out}");
    serde_json::from_str(&out).expect("JSON report")
}

#[test]
fn a_checkpoint_taken_while_the_guest_computes_holds_one_step_of_it() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    let done = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let guest = {
        let (done, stop) = (done.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 0;
            while !stop.load(Ordering::SeqCst) {
                step(&mut raw, k);
                k += 1;
                done.store(k, Ordering::SeqCst);
            }
            raw
        })
    };
    while done.load(Ordering::SeqCst) < 3 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let file = backend.dir().join("live.ckpt");
    let report = checkpoint(&backend, &file, "5");
    eprintln!("live checkpoint: {report}");
    let before_restore = done.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let mut raw = guest.join().expect("guest thread");
    let ran = done.load(Ordering::SeqCst);
    assert!(ran > before_restore.min(3), "the guest kept computing");

    assert_eq!(report["buffer_bytes"], 2 * SIZE, "{report}");
    assert!(report["rounds"].as_u64().unwrap() >= 1, "{report}");
    assert!(
        report["precopied_bytes"].as_u64().unwrap() >= 2 * SIZE,
        "every buffer is copied once while the guest runs: {report}"
    );
    assert!(
        report["paused_bytes"].as_u64().unwrap() <= SIZE,
        "the read-only buffer is never read again at the pause: {report}"
    );

    // Roll back to the checkpoint: `a` is exactly some step of the run,
    // never a mix of two.
    let (ok, out) = backend.ctl(&["restore", file.to_str().unwrap()]);
    assert!(ok, "restore failed: {out}");
    let a = read_a(&mut raw);
    let at = steps_matching(&a, ran);
    assert!(at.is_some(), "the checkpoint's `a` is no step of the run");
    // And the run goes on from there like an undisturbed one.
    let at = at.unwrap();
    step(&mut raw, at);
    assert_eq!(steps_matching(&read_a(&mut raw), at + 1), Some(at + 1));
}

#[test]
fn an_idle_guest_is_checkpointed_without_reading_buffers_in_the_pause() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    step(&mut raw, 0);
    let file = backend.dir().join("idle.ckpt");
    let live = checkpoint(&backend, &file, "3");
    assert_eq!(live["paused_bytes"], 0, "{live}");
    assert_eq!(live["precopied_bytes"], 2 * SIZE, "{live}");
    assert_eq!(live["rounds"], 1, "{live}");
    let live_bytes = std::fs::read(&file).unwrap();

    let stopped = checkpoint(&backend, &file, "0");
    assert_eq!(stopped["rounds"], 0, "{stopped}");
    assert_eq!(stopped["paused_bytes"], 2 * SIZE, "{stopped}");
    // Past the header and each one's random identity chunk.
    let after_identity = 16 + 12 + 16 + 4;
    assert_eq!(
        live_bytes[after_identity..],
        std::fs::read(&file).unwrap()[after_identity..],
        "a live checkpoint of an idle guest is the stop-and-copy one"
    );
}

#[test]
fn an_incremental_checkpoint_holds_only_what_changed_and_restores_with_its_base() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    step(&mut raw, 0);
    let base = backend.dir().join("base.ckpt");
    let whole = checkpoint(&backend, &base, "3");
    assert_eq!(whole["buffer_bytes"], 2 * SIZE, "{whole}");
    step(&mut raw, 1); // writes `a` only
    let delta = backend.dir().join("delta.ckpt");
    let (ok, out) = backend.ctl(&[
        "checkpoint",
        delta.to_str().unwrap(),
        "--incremental",
        base.to_str().unwrap(),
    ]);
    assert!(ok, "incremental checkpoint failed: {out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["buffer_bytes"], SIZE, "only `a` changed: {report}");
    let (base_len, delta_len) = (
        std::fs::metadata(&base).unwrap().len(),
        std::fs::metadata(&delta).unwrap().len(),
    );
    assert!(
        delta_len < base_len - SIZE + SIZE / 8,
        "{delta_len} vs {base_len}"
    );

    step(&mut raw, 2);
    // Without its base, an incremental checkpoint is refused, clearly.
    let (ok, out) = backend.ctl(&["restore", delta.to_str().unwrap()]);
    assert!(!ok && out.contains("incremental"), "{out}");
    // With it, the vGPU goes back to after step 1, `b` included: the run
    // goes on from there like an undisturbed one.
    let (ok, out) = backend.ctl(&[
        "restore",
        delta.to_str().unwrap(),
        "--base",
        base.to_str().unwrap(),
    ]);
    assert!(ok, "restore with the base failed: {out}");
    assert_eq!(steps_matching(&read_a(&mut raw), 3), Some(2));
    step(&mut raw, 2);
    assert_eq!(steps_matching(&read_a(&mut raw), 4), Some(3));

    // Another whole checkpoint is not the base the delta names, and an
    // incremental checkpoint is taken against the last whole one only.
    let other = backend.dir().join("other.ckpt");
    checkpoint(&backend, &other, "1");
    let (ok, out) = backend.ctl(&[
        "restore",
        delta.to_str().unwrap(),
        "--base",
        other.to_str().unwrap(),
    ]);
    assert!(!ok && out.contains("not the checkpoint"), "{out}");
    let (ok, out) = backend.ctl(&[
        "checkpoint",
        delta.to_str().unwrap(),
        "--incremental",
        base.to_str().unwrap(),
    ]);
    assert!(!ok && out.contains("last whole checkpoint"), "{out}");
    let (ok, out) = backend.ctl(&[
        "checkpoint",
        other.to_str().unwrap(),
        "--incremental",
        other.to_str().unwrap(),
    ]);
    assert!(!ok && out.contains("the base itself"), "{out}");
    // The vGPU is untouched by the refusals.
    step(&mut raw, 3);
    assert_eq!(steps_matching(&read_a(&mut raw), 5), Some(4));
}

#[test]
fn a_checkpoint_then_pause_leaves_the_vgpu_paused_until_resumed() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    step(&mut raw, 0);
    let file = backend.dir().join("paused.ckpt");
    let (ok, out) = backend.ctl(&["checkpoint", file.to_str().unwrap(), "--then", "pause"]);
    assert!(ok, "checkpoint failed: {out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(report["rounds"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(backend.status()["vms"][0]["paused"], true);
    let (ok, out) = backend.ctl(&["resume"]);
    assert!(ok, "{out}");
    assert_eq!(backend.status()["vms"][0]["paused"], false);
    step(&mut raw, 1);
    assert_eq!(steps_matching(&read_a(&mut raw), 2), Some(2));
}
