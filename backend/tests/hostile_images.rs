//! Hostile image and sampler messages: every region, pitch, format and
//! argument is bounded by the backend itself, whatever the guest library
//! checked, and answered with the spec's error status.

mod common;

use common::req;
use common::Backend;
use vgpu_protocol::image::image_type;
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, Request, Status};

const RGBA: u32 = 0x10B5;
const FLOAT: u32 = 0x10DE;

fn image(mem: u64, order: u32, ty: u32, dims: [u64; 3]) -> Request {
    CreateImage {
        mem,
        context: 1,
        flags: 1,
        channel_order: order,
        channel_type: FLOAT,
        image_type: ty,
        dims,
        array_size: 0,
        buffer: 0,
    }
    .into()
}

fn read(origin: [u64; 3], region: [u64; 3], len: u64) -> Request {
    EnqueueReadImage {
        queue: 2,
        mem: 10,
        origin,
        region,
        data: DataRef { offset: 0, len },
        wait: vec![],
        event: 0,
    }
    .into()
}

#[test]
fn hostile_image_messages_are_refused_and_the_session_goes_on() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let source = b"kernel void k(read_only image2d_t i, sampler_t s, global float4* p) \
                   { p[0] = read_imagef(i, s, (int2)(0, 0)); }"
        .to_vec();
    let setup: Vec<Request> = vec![
        req::context(1),
        req::queue(2, 1),
        image(10, RGBA, image_type::IMAGE2D, [8, 8, 0]),
        req::buffer(11, 1, 1, 64),
        CreateSampler {
            sampler: 12,
            context: 1,
            properties: vec![0x1152, 0, 0x1153, 0x1131, 0x1154, 0x1140],
        }
        .into(),
        req::program(3, 1, &source),
        req::build(3),
        req::kernel(4, 3, b"k"),
    ];
    let reply = raw.batch(1, &setup);
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );

    let arg = |index: u32, kind: ArgKind, handle: u64, value: Vec<u8>| -> Request {
        SetKernelArg {
            kernel: 4,
            index,
            arg_kind: kind as u32,
            size: value.len() as u64,
            value,
            handle,
        }
        .into()
    };
    let cases: Vec<(&str, Request, Status)> = vec![
        (
            "unknown channel order",
            image(20, 0x1234, image_type::IMAGE2D, [4, 4, 0]),
            Status::INVALID_IMAGE_FORMAT_DESCRIPTOR,
        ),
        (
            "size that overflows",
            image(21, RGBA, image_type::IMAGE3D, [u64::MAX / 4, 4, 4]),
            Status::INVALID_IMAGE_SIZE,
        ),
        (
            "larger than the vGPU's largest allocation",
            image(26, RGBA, image_type::IMAGE3D, [2048, 2048, 2048]),
            Status::INVALID_IMAGE_SIZE,
        ),
        (
            "not an image type",
            image(22, RGBA, 0x10F0, [4, 4, 0]),
            Status::INVALID_VALUE,
        ),
        (
            "1D buffer image without a buffer",
            image(23, RGBA, image_type::IMAGE1D_BUFFER, [4, 0, 0]),
            Status::INVALID_IMAGE_DESCRIPTOR,
        ),
        (
            "region past the edge",
            read([4, 0, 0], [8, 1, 1], 128),
            Status::INVALID_VALUE,
        ),
        (
            "origin that overflows",
            read([u64::MAX, 0, 0], [2, 1, 1], 32),
            Status::INVALID_VALUE,
        ),
        (
            "region beyond a 2D image's depth",
            read([0, 0, 0], [1, 1, 2], 32),
            Status::INVALID_VALUE,
        ),
        (
            "data shorter than the region",
            read([0, 0, 0], [8, 8, 1], 16),
            Status::INVALID_VALUE,
        ),
        (
            "fill colour of three bytes",
            EnqueueFillImage {
                queue: 2,
                mem: 10,
                color: vec![1, 2, 3],
                origin: [0; 3],
                region: [1, 1, 1],
                wait: vec![],
                event: 0,
            }
            .into(),
            Status::INVALID_VALUE,
        ),
        (
            "copy into a buffer too small",
            EnqueueCopyImageToBuffer {
                queue: 2,
                src: 10,
                dst: 11,
                src_origin: [0; 3],
                region: [8, 8, 1],
                dst_offset: 0,
                wait: vec![],
                event: 0,
            }
            .into(),
            Status::INVALID_VALUE,
        ),
        (
            "buffer read as an image",
            EnqueueReadImage {
                queue: 2,
                mem: 11,
                origin: [0; 3],
                region: [1, 1, 1],
                data: DataRef { offset: 0, len: 16 },
                wait: vec![],
                event: 0,
            }
            .into(),
            Status::INVALID_MEM_OBJECT,
        ),
        (
            "image read as a buffer",
            EnqueueReadBuffer {
                queue: 2,
                mem: 10,
                offset: 0,
                data: DataRef { offset: 0, len: 64 },
                wait: vec![],
                event: 0,
            }
            .into(),
            Status::INVALID_MEM_OBJECT,
        ),
        (
            "image filled as a buffer",
            EnqueueFillBuffer {
                queue: 2,
                mem: 10,
                pattern: vec![0; 4],
                offset: 0,
                size: 64,
                wait: vec![],
                event: 0,
            }
            .into(),
            Status::INVALID_MEM_OBJECT,
        ),
        (
            "image copied as a buffer",
            EnqueueCopyBuffer {
                queue: 2,
                src: 10,
                dst: 11,
                src_offset: 0,
                dst_offset: 0,
                size: 64,
                wait: vec![],
                event: 0,
            }
            .into(),
            Status::INVALID_MEM_OBJECT,
        ),
        (
            "sub-buffer of an image",
            CreateSubBuffer {
                mem: 25,
                parent: 10,
                flags: 1,
                origin: 0,
                size: 64,
            }
            .into(),
            Status::INVALID_MEM_OBJECT,
        ),
        (
            "sampler with an unknown property",
            CreateSampler {
                sampler: 24,
                context: 1,
                properties: vec![0x1234, 1],
            }
            .into(),
            Status::INVALID_VALUE,
        ),
        (
            "buffer for an image argument",
            arg(0, ArgKind::Mem, 11, vec![]),
            Status::INVALID_MEM_OBJECT,
        ),
        (
            "bytes for a sampler argument",
            arg(1, ArgKind::Value, 0, vec![0x10; 8]),
            Status::INVALID_SAMPLER,
        ),
        (
            "image for a buffer argument",
            arg(2, ArgKind::Mem, 10, vec![]),
            Status::INVALID_MEM_OBJECT,
        ),
        (
            "sampler for a buffer argument",
            arg(2, ArgKind::Sampler, 12, vec![]),
            Status::INVALID_ARG_VALUE,
        ),
    ];
    for (what, request, want) in cases {
        let (reply, _) = raw.batch_with_in(1, &[request], 4096);
        assert_eq!(reply.records[0].status, want, "{what}");
    }

    // The session still works: the right arguments, a launch, a read.
    let good = vec![
        arg(0, ArgKind::Mem, 10, vec![]),
        arg(1, ArgKind::Sampler, 12, vec![]),
        arg(2, ArgKind::Mem, 11, vec![]),
        EnqueueNdRange {
            queue: 2,
            kernel: 4,
            work_dim: 1,
            offset: [0; 3],
            global: [1, 1, 1],
            local: [0; 3],
            wait: vec![],
            event: 0,
        }
        .into(),
        read([0, 0, 0], [8, 8, 1], 1024),
        Finish { queue: 2 }.into(),
    ];
    let (reply, _) = raw.batch_with_in(1, &good, 1024);
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
}
