//! One worker process per front-end: what one VM's kernels can reach of
//! another's. VM A lets its own kernel tell where its secret buffer lives
//! (an attacker may learn addresses some other way); VM B's kernel then
//! reads that address. Within one process that read returned A's secret;
//! with a worker per front-end it reads B's own address space — it faults
//! (only B's worker dies) or finds something that is not A's — while A
//! computes on to the checksum the host computes.

mod common;

use std::time::{Duration, Instant};

use common::req;
use common::Backend;
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, Request, Status};
use vgpu_transport::Client;

const A_SOURCE: &str = "__kernel void leak(__global ulong *where, __global uint *secret) {\n\
                          where[0] = (ulong)secret;\n\
                        }\n\
                        __kernel void bump(__global uint *a, uint v) { a[get_global_id(0)] += v; }\n";
const B_SOURCE: &str = "__kernel void peek(__global uint *out, ulong at) {\n\
                          __global const uint *p = (__global const uint *)at;\n\
                          for (int i = 0; i < 16; i++) out[i] = p[i];\n\
                        }\n";
const WORDS: usize = 4096;
const BUMPS: u32 = 20;

fn mem_arg(kernel: u64, index: u32, mem: u64) -> Request {
    SetKernelArg {
        kernel,
        index,
        arg_kind: ArgKind::Mem as u32,
        size: 8,
        value: vec![],
        handle: mem,
    }
    .into()
}

fn value_arg(kernel: u64, index: u32, value: Vec<u8>) -> Request {
    SetKernelArg {
        kernel,
        index,
        arg_kind: ArgKind::Value as u32,
        size: value.len() as u64,
        value,
        handle: 0,
    }
    .into()
}

fn launch(kernel: u64, global: u64) -> Request {
    EnqueueNdRange {
        queue: 2,
        kernel,
        work_dim: 1,
        offset: [0; 3],
        global: [global, 1, 1],
        local: [0; 3],
        wait: vec![],
        event: 0,
    }
    .into()
}

/// A context, a queue and a built program: handles 1, 2, 3.
fn set_up(client: &Client, source: &str) -> Result<(), Status> {
    client.call(req::context(1))?;
    client.call(req::queue(2, 1))?;
    client.call(req::program(3, 1, source.as_bytes()))?;
    client.call(req::build(3))?;
    Ok(())
}

fn create_buffer(client: &Client, mem: u64, size: u64) -> Result<(), Status> {
    client.call(req::buffer(mem, 1, 1, size)).map(drop)
}

fn read(client: &Client, mem: u64, len: usize) -> Result<Vec<u8>, Status> {
    let mut bytes = vec![0u8; len];
    client.call_with_in(&mut bytes, |data, start| {
        EnqueueReadBuffer {
            queue: 2,
            mem,
            offset: start,
            data,
            wait: vec![],
            event: 0,
        }
        .into()
    })?;
    Ok(bytes)
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// VM B: reads 16 words at `address` with its own kernel.
fn peek(client: &Client, address: u64) -> Result<Vec<u32>, Status> {
    set_up(client, B_SOURCE)?;
    create_buffer(client, 4, 64)?;
    client.call(req::kernel(5, 3, b"peek"))?;
    client.call(mem_arg(5, 0, 4))?;
    client.call(value_arg(5, 1, address.to_le_bytes().to_vec()))?;
    client.call(launch(5, 1))?;
    client.call(Finish { queue: 2 }.into())?;
    Ok(words(&read(client, 4, 64)?))
}

fn worker_pids(backend: &Backend) -> Vec<u64> {
    let status = backend.status();
    status["vms"]
        .as_array()
        .expect("vms")
        .iter()
        .map(|vm| vm["worker_pid"].as_u64().expect("worker_pid"))
        .collect()
}

/// Two VMs, A and B, each with A's program built, and their workers' pids.
fn two_vms_set_up(backend: &Backend) -> (Client, Client, Vec<u64>) {
    let a = backend.client();
    let b = backend.client();
    set_up(&a, A_SOURCE).expect("A set up");
    set_up(&b, A_SOURCE).expect("B set up");
    let workers = worker_pids(backend);
    assert_eq!(workers.len(), 2);
    (a, b, workers)
}

/// Kills a worker and waits until the supervisor has reaped it.
fn kill_worker(backend: &Backend, pid: u64) {
    // SAFETY: killing a worker process this test's backend started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    // The supervisor reaps the worker soon; the bound only stops a hang.
    let deadline = Instant::now() + Duration::from_secs(60);
    while worker_pids(backend).contains(&pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_kernel_of_one_vm_cannot_read_another_vms_buffer() {
    let mut backend = Backend::start();
    let a = backend.client();
    let b = backend.client();
    let workers = worker_pids(&backend);
    assert_eq!(workers.len(), 2, "two front-ends, two workers: {workers:?}");
    assert_ne!(workers[0], workers[1], "both VMs in one worker");
    assert!(!workers.contains(&(backend.pid() as u64)));

    // A: a secret buffer only A's kernels should ever see.
    let secret = 0x5ec0_0000 ^ std::process::id();
    set_up(&a, A_SOURCE).expect("A set up");
    let initial: Vec<u8> = (0..WORDS as u32)
        .flat_map(|i| (secret ^ i).to_le_bytes())
        .collect();
    a.call(req::buffer(4, 1, 1, (WORDS * 4) as u64))
        .expect("A's buffer");
    a.call_with_out(&initial, |data, start| {
        EnqueueWriteBuffer {
            queue: 2,
            mem: 4,
            offset: start,
            data,
            wait: vec![],
            event: 0,
        }
        .into()
    })
    .expect("A writes its secret");
    create_buffer(&a, 5, 8).expect("A's address buffer");
    for request in [
        req::kernel(6, 3, b"leak"),
        mem_arg(6, 0, 5),
        mem_arg(6, 1, 4),
        launch(6, 1),
        Finish { queue: 2 }.into(),
    ] {
        a.call(request).expect("A learns its buffer's address");
    }
    let address = u64::from_le_bytes(read(&a, 5, 8).unwrap().try_into().unwrap());

    // B reads that address from its own kernel, on a thread: if its worker
    // faults, B's calls fail (and a failed call may panic the transport).
    let peeked = std::thread::spawn(move || peek(&b, address)).join();
    match &peeked {
        Ok(Ok(seen)) => {
            let leaked: Vec<u32> = (0..16).map(|i| secret ^ i).collect();
            assert_ne!(seen, &leaked, "B read A's secret at {address:#x}");
        }
        Ok(Err(status)) => eprintln!("B's read failed: {status:?}"),
        Err(_) => eprintln!("B's front-end lost its worker"),
    }

    // A computes on, to the checksum the host computes.
    a.call(req::kernel(8, 3, b"bump")).expect("A's bump kernel");
    a.call(mem_arg(8, 0, 4)).expect("arg");
    for step in 1..=BUMPS {
        a.call(value_arg(8, 1, step.to_le_bytes().to_vec()))
            .expect("arg");
        a.call(launch(8, WORDS as u64)).expect("A launches");
    }
    a.call(Finish { queue: 2 }.into()).expect("A finishes");
    let added: u32 = (1..=BUMPS).sum();
    let expected: Vec<u32> = (0..WORDS as u32)
        .map(|i| (secret ^ i).wrapping_add(added))
        .collect();
    assert_eq!(words(&read(&a, 4, WORDS * 4).unwrap()), expected);

    // Whatever happened to B, the backend serves A and new front-ends.
    assert!(backend.is_running(), "the supervisor died");
    if peeked.as_ref().map_or(true, |r| r.is_err()) {
        // The supervisor reaps the worker soon; the bound only stops a hang.
        let deadline = Instant::now() + Duration::from_secs(60);
        while worker_pids(&backend).contains(&workers[1]) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let now = worker_pids(&backend);
        assert!(
            now.contains(&workers[0]) && !now.contains(&workers[1]),
            "{now:?}"
        );
    }
    let c = backend.client();
    set_up(&c, A_SOURCE).expect("a new front-end is served");
}

#[test]
fn a_worker_killed_ends_only_its_own_vm() {
    let mut backend = Backend::start();
    let (a, b, workers) = two_vms_set_up(&backend);
    kill_worker(&backend, workers[1]);
    assert!(
        b.call(Finish { queue: 2 }.into()).is_err(),
        "B still served"
    );
    // (B's transport may reconnect, as after a backend restart: a new
    // front-end with a new worker.)
    let now = worker_pids(&backend);
    assert!(
        now.contains(&workers[0]) && !now.contains(&workers[1]),
        "{now:?}"
    );
    create_buffer(&a, 4, 4096).expect("A computes on");
    a.call(Finish { queue: 2 }.into()).expect("A finishes");
    assert!(backend.is_running(), "the supervisor died with a worker");
    let c = backend.client();
    set_up(&c, A_SOURCE).expect("a new front-end is served");
}

/// `(real uid, the worker's process limit)` of a process.
fn uid_and_process_limit(pid: u64) -> (u32, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("Uid line");
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let nproc = limits
        .lines()
        .find(|l| l.starts_with("Max processes"))
        .expect("Max processes line")
        .split_whitespace()
        .nth(2)
        .expect("soft limit")
        .to_string();
    (uid, nproc)
}

#[test]
fn with_worker_uids_each_vm_has_a_uid_and_process_limit_of_its_own() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: --worker-uids needs root");
        return;
    }
    const FIRST: u32 = 3_999_000_100;
    let range = format!("{FIRST}-{}", FIRST + 2);
    let mut backend = Backend::start_with(&["--worker-uids", &range], &[]);
    let (a, _b, workers) = two_vms_set_up(&backend);
    let (uid_a, limit_a) = uid_and_process_limit(workers[0]);
    let (uid_b, limit_b) = uid_and_process_limit(workers[1]);
    assert_ne!(uid_a, uid_b, "two VMs' workers share a uid");
    for uid in [uid_a, uid_b] {
        assert!(
            (FIRST..=FIRST + 2).contains(&uid),
            "uid {uid} outside {range}"
        );
    }
    assert_eq!((limit_a.as_str(), limit_b.as_str()), ("1024", "1024"));

    // The third uid is the standby's: a third VM is served, and once B's
    // worker is gone its uid serves a fourth.
    let c = backend.client();
    set_up(&c, A_SOURCE).expect("C set up on the standby's uid");
    kill_worker(&backend, workers[1]);
    let d = backend.client();
    set_up(&d, A_SOURCE).expect("D served once B's uid came back");
    create_buffer(&a, 4, 4096).expect("A computes on");
    a.call(Finish { queue: 2 }.into()).expect("A finishes");
    assert!(backend.is_running());
}
