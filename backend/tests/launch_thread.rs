//! The OpenCL launch thread (`VGPU_OPENCL_LAUNCH_THREAD=1`, forced on: on
//! a host of two CPUs it is off by default): runs of launches and the
//! argument settings between them leave the batch's thread, and must reach
//! the device in the guest's order, with refusals reported to the guest.
//! Real daemon, real PoCL.

mod common;

use common::{calls, req, Backend};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, Status};
use vgpu_transport::Client;

/// Not commutative: launches applied out of order, or with another
/// launch's `k`, give another result.
const SOURCE: &[u8] = b"kernel void advance(global int *x, int k) {\n\
    size_t i = get_global_id(0);\n\
    x[i] = x[i] * 3 + k + (int)i;\n}\n";

const ITEMS: usize = 64;

fn value_arg(kernel: u64, index: u32, value: &[u8]) -> Request {
    SetKernelArg {
        kernel,
        index,
        arg_kind: ArgKind::Value as u32,
        size: value.len() as u64,
        value: value.to_vec(),
        handle: 0,
    }
    .into()
}

fn launch(queue: u64, kernel: u64) -> Request {
    EnqueueNdRange {
        queue,
        kernel,
        work_dim: 1,
        offset: [0; 3],
        global: [ITEMS as u64, 1, 1],
        local: [0; 3],
        wait: vec![],
        event: 0,
    }
    .into()
}

fn backend() -> Backend {
    Backend::start_with(&[], &[("VGPU_OPENCL_LAUNCH_THREAD", "1")])
}

/// Context, queue, the `advance` kernel and its zeroed buffer (argument 0).
fn set_up(client: &Client) -> (u64, u64, u64) {
    let (context, queue) = calls::context_and_queue(client);
    let kernel = calls::built_kernel(client, context, SOURCE, b"advance");
    let mem = client.new_handle();
    client
        .defer(req::buffer(mem, context, 1, (ITEMS * 4) as u64))
        .expect("buffer");
    client
        .defer(
            EnqueueFillBuffer {
                queue,
                mem,
                pattern: vec![0; 4],
                offset: 0,
                size: (ITEMS * 4) as u64,
                wait: vec![],
                event: 0,
            }
            .into(),
        )
        .expect("fill");
    client.defer(req::mem_arg(kernel, 0, mem)).expect("arg 0");
    (queue, kernel, mem)
}

fn read_back(client: &Client, queue: u64, mem: u64) -> Result<Vec<i32>, Status> {
    let mut out = vec![0u8; ITEMS * 4];
    calls::read_buffer(client, queue, mem, &mut out)?;
    Ok(out
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect())
}

#[test]
fn launches_and_their_arguments_reach_the_device_in_order() {
    let backend = backend();
    let client = backend.client();
    let (queue, kernel, mem) = set_up(&client);
    let mut expected = vec![0i32; ITEMS];
    // Several batches' worth, each launch with its own `k`.
    for k in 0..3000i32 {
        client
            .defer(value_arg(kernel, 1, &k.to_le_bytes()))
            .expect("arg 1");
        client.defer(launch(queue, kernel)).expect("launch");
        for (i, x) in expected.iter_mut().enumerate() {
            *x = x.wrapping_mul(3).wrapping_add(k).wrapping_add(i as i32);
        }
    }
    assert_eq!(read_back(&client, queue, mem).expect("read"), expected);
    assert_eq!(client.take_deferred_error(), None);
}

#[test]
fn an_argument_the_device_refuses_late_reaches_the_guest() {
    let backend = backend();
    let client = backend.client();
    let (queue, kernel, mem) = set_up(&client);
    for k in 0..64i32 {
        client
            .defer(value_arg(kernel, 1, &k.to_le_bytes()))
            .expect("arg 1");
        client.defer(launch(queue, kernel)).expect("launch");
    }
    // Eight bytes for an `int`: admitted (a plain value), refused by the
    // device, on the launch thread while it still has launches.
    client
        .defer(value_arg(kernel, 1, &7u64.to_le_bytes()))
        .expect("bad arg");
    // The next synchronizing call hears of it, then the session goes on.
    let first = read_back(&client, queue, mem);
    let heard = first.err().or(client.take_deferred_error());
    assert_eq!(heard, Some(Status::INVALID_ARG_SIZE));
    assert!(read_back(&client, queue, mem).is_ok());
}
