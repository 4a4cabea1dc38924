//! Images and samplers through a checkpoint and restart, and a re-home:
//! contents, kernel arguments and a kernel sampling the image give what
//! they gave before.

mod common;

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::image::image_type;
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, Request};

const W: u64 = 16;
const H: u64 = 8;
const LAYERS: u64 = 3;
const PIXEL: u64 = 16; // RGBA float
const SOURCE: &[u8] = b"kernel void k(read_only image2d_t i, sampler_t s, global float4* out) {
    int x = get_global_id(0), y = get_global_id(1);
    out[y * get_image_width(i) + x] = read_imagef(i, s, (float2)(x + 0.75f, y + 0.5f));
}";

fn pixels(seed: u32, n: u64) -> Vec<u8> {
    (0..n as u32 * 4)
        .flat_map(|i| ((i.wrapping_mul(37).wrapping_add(seed) % 1000) as f32 / 7.0).to_le_bytes())
        .collect()
}

/// One request whose out-data is `data`, in a chain of its own.
fn send_with_out(raw: &mut RawFrontend, request: Request, data: &[u8]) {
    req::assert_all_ok(&raw.batch_with_out(1, &[request], data));
}

fn image(mem: u64, ty: u32, dims: [u64; 3], array_size: u64) -> Request {
    CreateImage {
        mem,
        context: 1,
        flags: 1,
        channel_order: 0x10B5,
        channel_type: 0x10DE,
        image_type: ty,
        dims,
        array_size,
        buffer: 0,
    }
    .into()
}

/// Context 1, queue 2, program 3, kernel 4 (args: image 10, sampler 12,
/// buffer 11), a 2D array 13; contents written into both images.
fn setup(raw: &mut RawFrontend) {
    raw.open_session(1);
    let arg = |index: u32, kind: ArgKind, handle: u64| -> Request {
        SetKernelArg {
            kernel: 4,
            index,
            arg_kind: kind as u32,
            size: 0,
            value: vec![],
            handle,
        }
        .into()
    };
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            image(10, image_type::IMAGE2D, [W, H, 0], 0),
            req::buffer(11, 1, 1, W * H * PIXEL),
            // Unnormalized, clamp to edge, linear.
            CreateSampler {
                sampler: 12,
                context: 1,
                properties: vec![0x1152, 0, 0x1153, 0x1131, 0x1154, 0x1141],
            }
            .into(),
            image(13, image_type::IMAGE2D_ARRAY, [W, H, 0], LAYERS),
            req::program(3, 1, SOURCE),
            req::build(3),
            req::kernel(4, 3, b"k"),
            arg(0, ArgKind::Mem, 10),
            arg(1, ArgKind::Sampler, 12),
            arg(2, ArgKind::Mem, 11),
        ],
    );
    req::assert_all_ok(&reply);
    let write = |mem: u64, region: [u64; 3], len: u64| -> Request {
        EnqueueWriteImage {
            queue: 2,
            mem,
            origin: [0; 3],
            region,
            data: DataRef { offset: 0, len },
            wait: vec![],
            event: 0,
        }
        .into()
    };
    send_with_out(raw, write(10, [W, H, 1], W * H * PIXEL), &pixels(1, W * H));
    let n = W * H * LAYERS;
    send_with_out(raw, write(13, [W, H, LAYERS], n * PIXEL), &pixels(2, n));
}

/// The kernel's output, then the two images' contents.
fn observe(raw: &mut RawFrontend) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    req::assert_all_ok(
        &raw.batch(
            1,
            &[
                EnqueueNdRange {
                    queue: 2,
                    kernel: 4,
                    work_dim: 2,
                    offset: [0; 3],
                    global: [W, H, 1],
                    local: [0; 3],
                    wait: vec![],
                    event: 0,
                }
                .into(),
                Finish { queue: 2 }.into(),
            ],
        ),
    );
    let mut read = |request: Request, len: u64| {
        let (reply, data) = raw.batch_with_in(1, &[request], len as u32);
        req::assert_all_ok(&reply);
        data
    };
    let size = W * H * PIXEL;
    let out = read(
        EnqueueReadBuffer {
            queue: 2,
            mem: 11,
            offset: 0,
            data: DataRef {
                offset: 0,
                len: size,
            },
            wait: vec![],
            event: 0,
        }
        .into(),
        size,
    );
    let image = |mem, region: [u64; 3]| -> Request {
        let len = region.iter().product::<u64>() * PIXEL;
        EnqueueReadImage {
            queue: 2,
            mem,
            origin: [0; 3],
            region,
            data: DataRef { offset: 0, len },
            wait: vec![],
            event: 0,
        }
        .into()
    };
    let flat = read(image(10, [W, H, 1]), size);
    let layers = read(image(13, [W, H, LAYERS]), size * LAYERS);
    (out, flat, layers)
}

#[test]
fn images_and_samplers_survive_a_checkpoint_and_restart() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    let before = observe(&mut raw);
    assert_eq!(before.1, pixels(1, W * H));
    assert_eq!(before.2, pixels(2, W * H * LAYERS));
    let file = std::env::temp_dir().join(format!("vgpu-images-{}.ckpt", std::process::id()));
    let (ok, out) = backend.ctl(&["checkpoint", file.to_str().unwrap(), "--then", "pause"]);
    assert!(ok, "checkpoint failed: {out}");
    let next_seq = raw.next_seq;
    drop(raw);
    drop(backend);
    let restarted = Backend::start_with(&["--restore", file.to_str().unwrap()], &[]);
    let mut raw = restarted.raw();
    raw.next_seq = next_seq;
    // Same handles, same arguments: the kernel samples the restored image.
    let after = observe(&mut raw);
    let _ = std::fs::remove_file(&file);
    assert!(after.0 == before.0, "kernel output differs after restart");
    assert!(after.1 == before.1, "2D image differs after restart");
    assert!(after.2 == before.2, "2D array differs after restart");
}

#[test]
fn images_and_samplers_survive_a_rehome() {
    let env = [("POCL_DEVICES", "basic pthread")];
    let backend = Backend::start_with(&["--device", "opencl:basic"], &env);
    let mut raw = backend.raw();
    setup(&mut raw);
    let before = observe(&mut raw);
    let (ok, out) = backend.ctl(&["rehome", "--device", "opencl:pthread"]);
    assert!(ok && out.contains("rehomed"), "{out}");
    let after = observe(&mut raw);
    assert!(after == before, "results differ after the re-home");
}

#[test]
fn a_profile_without_images_offers_none_and_refuses_vgpus_that_have_them() {
    let dir = std::env::temp_dir().join(format!("vgpu-noimg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let own = dir.join("own.prof");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
        .arg("--write-profile")
        .arg(&own)
        .status()
        .unwrap();
    assert!(status.success());
    let mut plain = vgpu_migration::Profile::from_bytes(&std::fs::read(&own).unwrap()).unwrap();
    assert!(plain.image_support, "PoCL has images");
    plain.image_support = false;
    let plain_path = dir.join("plain.prof");
    std::fs::write(&plain_path, plain.to_bytes()).unwrap();

    let with_images = Backend::start();
    let mut raw = with_images.raw();
    setup(&mut raw);
    let file = dir.join("images.ckpt");
    let (ok, out) = with_images.ctl(&["checkpoint", file.to_str().unwrap()]);
    assert!(ok, "{out}");

    let without = Backend::start_with(&["--profile", plain_path.to_str().unwrap()], &[]);
    let mut guest = without.raw();
    guest.open_session(3);
    let reply = guest.batch(
        3,
        &[
            GetInfo {
                target: 2,
                handle: 0,
                index: 0,
                param: 0x1016, // CL_DEVICE_IMAGE_SUPPORT
            }
            .into(),
            req::context(1),
            image(10, image_type::IMAGE2D, [W, H, 0], 0),
            CreateSampler {
                sampler: 12,
                context: 1,
                properties: vec![],
            }
            .into(),
        ],
    );
    assert_eq!(
        reply.records[0].payload,
        0u32.to_le_bytes(),
        "image support"
    );
    assert_eq!(
        reply.records[2].status,
        vgpu_protocol::Status::INVALID_OPERATION
    );
    assert_eq!(
        reply.records[3].status,
        vgpu_protocol::Status::INVALID_OPERATION
    );
    let (ok, out) = without.ctl(&["restore", file.to_str().unwrap()]);
    assert!(!ok && out.contains("image"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
