//! Kernels computed by the real OpenCL device (PoCL here) through the real
//! daemon on its real socket, checked against a CPU reference.

mod common;
use common::req;

use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, InfoTarget, ObjectKind, Status, Wire};
use vgpu_transport::Client;

const SOURCE: &str = r#"
kernel void vadd(global const float* a, global const float* b, global float* c) {
    size_t i = get_global_id(0);
    c[i] = a[i] + b[i];
}
kernel void reduce(global const int* in, global int* out, local int* scratch) {
    size_t lid = get_local_id(0);
    scratch[lid] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t s = get_local_size(0) / 2; s > 0; s /= 2) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) out[get_group_id(0)] = scratch[0];
}
"#;

fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: plain-old-data element types (f32, i32) viewed as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
        .to_vec()
}

fn set_mem(client: &Client, kernel: u64, index: u32, mem: u64) {
    client
        .defer(
            SetKernelArg {
                kernel,
                index,
                arg_kind: ArgKind::Mem as u32,
                size: 8,
                value: vec![],
                handle: mem,
            }
            .into(),
        )
        .unwrap();
}

fn create_buffer(client: &Client, context: u64, data: &[u8]) -> u64 {
    let mem = client.new_handle();
    let size = data.len() as u64;
    client
        .defer_with_out(data, |init, _| {
            CreateBuffer {
                mem,
                context,
                flags: 1,
                size,
                init,
            }
            .into()
        })
        .unwrap();
    mem
}

fn setup(client: &Client) -> (u64, u64, u64) {
    let context = client.new_handle();
    client.defer(req::context(context)).unwrap();
    let queue = client.new_handle();
    client.defer(req::queue(queue, context)).unwrap();
    let program = client.new_handle();
    client
        .defer(req::program(program, context, SOURCE.as_bytes()))
        .unwrap();
    client.call(req::build(program)).unwrap();
    (context, queue, program)
}

fn read(client: &Client, queue: u64, mem: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    common::calls::read_buffer(client, queue, mem, &mut out).unwrap();
    out
}

#[test]
fn vector_add_and_local_memory_reduction_match_the_cpu() {
    let backend = common::Backend::start();
    let client = backend.client();
    let (context, queue, program) = setup(&client);

    let n = 4096usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    let (ma, mb) = (
        create_buffer(&client, context, &bytes_of(&a)),
        create_buffer(&client, context, &bytes_of(&b)),
    );
    let mc = client.new_handle();
    client
        .defer(req::buffer(mc, context, 1, (n * 4) as u64))
        .unwrap();
    let vadd = client.new_handle();
    client.defer(req::kernel(vadd, program, b"vadd")).unwrap();
    for (i, m) in [ma, mb, mc].into_iter().enumerate() {
        set_mem(&client, vadd, i as u32, m);
    }
    client
        .defer(
            EnqueueNdRange {
                queue,
                kernel: vadd,
                work_dim: 1,
                offset: [0; 3],
                global: [n as u64, 1, 1],
                local: [0; 3],
                wait: vec![],
                event: 0,
            }
            .into(),
        )
        .unwrap();
    let c = read(&client, queue, mc, n * 4);
    let expected: Vec<u8> = bytes_of(&a.iter().zip(&b).map(|(x, y)| x + y).collect::<Vec<f32>>());
    assert_eq!(c, expected, "vector add differs from the CPU");

    let group = 64usize;
    let input: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % 1000 - 500).collect();
    let min = create_buffer(&client, context, &bytes_of(&input));
    let mout = client.new_handle();
    let groups = n / group;
    client
        .defer(req::buffer(mout, context, 1, (groups * 4) as u64))
        .unwrap();
    let reduce = client.new_handle();
    client
        .defer(req::kernel(reduce, program, b"reduce"))
        .unwrap();
    set_mem(&client, reduce, 0, min);
    set_mem(&client, reduce, 1, mout);
    client
        .defer(
            SetKernelArg {
                kernel: reduce,
                index: 2,
                arg_kind: ArgKind::Local as u32,
                size: (group * 4) as u64,
                value: vec![],
                handle: 0,
            }
            .into(),
        )
        .unwrap();
    let done = client.new_handle();
    client
        .defer(
            EnqueueNdRange {
                queue,
                kernel: reduce,
                work_dim: 1,
                offset: [0; 3],
                global: [n as u64, 1, 1],
                local: [group as u64, 1, 1],
                wait: vec![],
                event: done,
            }
            .into(),
        )
        .unwrap();
    client
        .call(WaitForEvents { events: vec![done] }.into())
        .unwrap();
    let sums = read(&client, queue, mout, groups * 4);
    let expected: Vec<i32> = input.chunks(group).map(|c| c.iter().sum()).collect();
    assert_eq!(sums, bytes_of(&expected), "reduction differs from the CPU");
    assert_eq!(client.flush(), Ok(()), "no deferred call failed");

    let status = client
        .call(
            GetInfo {
                target: InfoTarget::Event as u32,
                handle: done,
                index: 0,
                param: 0x11D3,
            }
            .into(),
        )
        .unwrap();
    assert_eq!(
        i32::from_le_bytes(status[..4].try_into().unwrap()),
        0,
        "event is CL_COMPLETE"
    );
}

#[test]
fn device_info_comes_from_the_real_device_and_handles_stay_home() {
    let backend = common::Backend::start();
    let client = backend.client();
    let name = client
        .call(
            GetInfo {
                target: InfoTarget::Device as u32,
                handle: 0,
                index: 0,
                param: 0x102B,
            }
            .into(),
        )
        .unwrap();
    assert!(String::from_utf8_lossy(&name).contains("pthread") || !name.is_empty());
    // CL_DEVICE_PLATFORM is a host handle: never sent to a guest.
    let platform = client.call(
        GetInfo {
            target: InfoTarget::Device as u32,
            handle: 0,
            index: 0,
            param: 0x1031,
        }
        .into(),
    );
    assert_eq!(platform, Err(Status::INVALID_VALUE));
}

#[test]
fn session_close_releases_everything() {
    let backend = common::Backend::start();
    let client = backend.client();
    let (context, _queue, _program) = setup(&client);
    let _buffer = create_buffer(&client, context, &[0u8; 64]);
    let stats = client.call(SessionStats {}.into()).unwrap();
    let counts = SessionStatsReply::from_bytes(&stats).unwrap().counts;
    assert_eq!(counts[ObjectKind::Mem.index()], 1);
    assert!(
        backend.status()["objects"]["buffers"] == 1,
        "{}",
        backend.status()
    );
    drop(client);
    let deadline = std::time::Instant::now() + common::TIMEOUT;
    while backend.status()["sessions"] != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "session survived its front-end: {}",
            backend.status()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
