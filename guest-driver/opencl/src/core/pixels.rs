//! Moving pixels between application memory and an image. Pixels travel
//! tightly packed, in pieces of at most `PIECE_LIMIT` bytes; the
//! application's row and slice pitches are applied here (gathered for
//! writes, scattered for reads), so the backend bounds each message by the
//! region and the pixel size alone.

use vgpu_protocol::image as img;
use vgpu_protocol::messages::{EnqueueReadImage, EnqueueWriteImage, InitImage};
use vgpu_protocol::Request;

use opencl_sys::{CL_INVALID_OPERATION, CL_INVALID_VALUE};

use crate::core::image::{HostLayout, ImageDesc};
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::queue::Queue;
use crate::core::rect::{pieces, Layout};

/// Packed bytes of one message at most; well under any transport's chunk.
const PIECE_LIMIT: u64 = 1 << 20;

/// What a pixel move talks to.
pub enum Target {
    /// Initial contents, outside any queue.
    Init,
    /// A command on `queue`, after `wait`; `event` on its last piece.
    Queue {
        queue: u64,
        wait: Vec<u64>,
        event: u64,
        blocking: bool,
    },
}

impl Target {
    /// A command on `queue`, after `wait`, carrying `event`.
    pub fn on(queue: &Cl<Queue>, wait: Vec<u64>, event: u64, blocking: bool) -> Self {
        Target::Queue {
            queue: queue.handle(),
            wait,
            event,
            blocking,
        }
    }
}

/// Application memory of a pixel move.
pub enum Host<'a> {
    From(&'a [u8]),
    Into(&'a mut [u8]),
}

/// Moves `region` at `origin` of the image between the image and `host`
/// (laid out by `layout`), in packed pieces.
pub fn move_pixels(
    mem: &Cl<Mem>,
    image: &ImageDesc,
    target: &Target,
    origin: [u64; 3],
    region: [u64; 3],
    mut host: Host<'_>,
    layout: HostLayout,
) -> ClResult<()> {
    let client = platform::client()?;
    let elem = image.elem;
    let packed_px = Layout {
        origin: [0; 3],
        row_pitch: region[0],
        slice_pitch: region[0] * region[1],
    };
    let list = pieces(region, &packed_px, (PIECE_LIMIT / elem).max(1));
    for (i, p) in list.iter().enumerate() {
        let (first, last) = (i == 0, i + 1 == list.len());
        let at = [0, 1, 2].map(|d| origin[d] + p.at[d]);
        let len = img::packed_len(p.size, elem).ok_or(CL_INVALID_VALUE)? as usize;
        let mut packed = vec![0u8; len];
        // A chunk the client split further than a piece names no image, so
        // the backend refuses it rather than misplacing pixels.
        let handle = |chunk: u64| if chunk == 0 { mem.handle() } else { 0 };
        match (&mut host, target) {
            (Host::From(src), _) => {
                gather(&layout, src, &mut packed, p.at, p.size)?;
                let make = |data, chunk| -> Request {
                    match target {
                        Target::Init => InitImage {
                            mem: handle(chunk),
                            origin: at,
                            region: p.size,
                            data,
                        }
                        .into(),
                        Target::Queue {
                            queue, wait, event, ..
                        } => EnqueueWriteImage {
                            queue: *queue,
                            mem: handle(chunk),
                            origin: at,
                            region: p.size,
                            data,
                            wait: if first { wait.clone() } else { Vec::new() },
                            event: if last { *event } else { 0 },
                        }
                        .into(),
                    }
                };
                let blocking = matches!(target, Target::Queue { blocking: true, .. });
                if blocking {
                    client.call_with_out(&packed, make).map(drop)
                } else {
                    client.defer_with_out(&packed, make)
                }
                .map_err(|s| s.0)?;
            }
            (
                Host::Into(dst),
                Target::Queue {
                    queue, wait, event, ..
                },
            ) => {
                client
                    .call_with_in(&mut packed, |data, chunk| -> Request {
                        EnqueueReadImage {
                            queue: *queue,
                            mem: handle(chunk),
                            origin: at,
                            region: p.size,
                            data,
                            wait: if first { wait.clone() } else { Vec::new() },
                            event: if last { *event } else { 0 },
                        }
                        .into()
                    })
                    .map_err(|s| s.0)?;
                scatter(&layout, dst, &packed, p.at, p.size)?;
            }
            (Host::Into(_), Target::Init) => return Err(CL_INVALID_OPERATION),
        }
    }
    Ok(())
}

/// Rows of the piece `(at, size)` of the region, from `host` into `packed`.
fn gather(
    layout: &HostLayout,
    host: &[u8],
    packed: &mut [u8],
    at: [u64; 3],
    size: [u64; 3],
) -> ClResult<()> {
    let row = (size[0] * layout.elem) as usize;
    for (n, chunk) in packed.chunks_exact_mut(row).enumerate() {
        let (y, z) = (n as u64 % size[1], n as u64 / size[1]);
        let start = layout.offset([at[0], at[1] + y, at[2] + z])? as usize;
        chunk.copy_from_slice(host.get(start..start + row).ok_or(CL_INVALID_VALUE)?);
    }
    Ok(())
}

/// Rows of the piece `(at, size)` of the region, from `packed` into `host`.
fn scatter(
    layout: &HostLayout,
    host: &mut [u8],
    packed: &[u8],
    at: [u64; 3],
    size: [u64; 3],
) -> ClResult<()> {
    let row = (size[0] * layout.elem) as usize;
    for (n, chunk) in packed.chunks_exact(row).enumerate() {
        let (y, z) = (n as u64 % size[1], n as u64 / size[1]);
        let start = layout.offset([at[0], at[1] + y, at[2] + z])? as usize;
        host.get_mut(start..start + row)
            .ok_or(CL_INVALID_VALUE)?
            .copy_from_slice(chunk);
    }
    Ok(())
}
