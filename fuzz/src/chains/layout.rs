//! Descriptor layouts for `backend_chains`: how the four streams of one
//! batch (request, out-data, reply, in-data) are cut into descriptors in
//! guest memory, as a hostile driver might cut them — many small
//! descriptors, several pointing at the same guest pages, writable pieces
//! over the request or the out-data, and chains damaged at and past the
//! limits `chain::resolve` enforces.

use arbitrary::{Result, Unstructured};
use vgpu_protocol::limits::MAX_CHAIN_DESCRIPTORS;

/// Guest memory of one run.
pub const RAM: u64 = 2 << 20;
/// Where the split ring lives (descriptor table, available and used rings
/// of a queue of `QUEUE_SIZE`).
pub const QUEUE_SIZE: u16 = 8192;
/// Regions of the four streams, 64 KiB each; the rest of memory is spare
/// room that aliasing and out-of-range descriptors point into.
pub const REQUEST_AT: u64 = 0x4_0000;
pub const OUT_AT: u64 = 0x5_0000;
pub const REPLY_AT: u64 = 0x6_0000;
pub const IN_AT: u64 = 0x7_0000;
pub const REGION: u64 = 0x1_0000;
/// Room of one chain's reply when several are in flight at once.
pub const REPLY_SLOT: u64 = 0x4000;

/// One descriptor as the driver writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub writable: bool,
}

/// How the out-data and in-data streams are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aliasing {
    /// Every stream in its own region.
    None,
    /// Every out-data descriptor over the same page.
    OutOnOnePage,
    /// Every in-data descriptor over the same page.
    InOnOnePage,
    /// In-data written over the out-data region.
    InOverOut,
    /// In-data written over the request region.
    InOverRequest,
    /// In-data of thousands of descriptors each covering all memory from
    /// the in-data region on: gigabytes of stream over 1.5 MiB.
    HugeIn,
}

/// How the chain is damaged after the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    None,
    /// One descriptor reaches past the end of guest memory.
    OutOfRange,
    /// One descriptor of length `u32::MAX`.
    HugeLength,
    /// A readable descriptor after the writable ones.
    ReadableAfterWritable,
    /// Zero-length descriptors between the others.
    ZeroLength,
    /// The last descriptor's `next` goes back to the head.
    Loop,
    /// One more descriptor than `MAX_CHAIN_DESCRIPTORS`.
    TooLong,
    /// Exactly `MAX_CHAIN_DESCRIPTORS` descriptors.
    AtTheLimit,
}

/// A chain's descriptors and what the checks may expect of it.
#[derive(Debug)]
pub struct Layout {
    pub descs: Vec<Desc>,
    /// Where the reply lands, in order (disjoint from each other); empty
    /// where that is not known (a damaged batch header).
    pub reply: Vec<Desc>,
    /// Whether the last descriptor points back at the head.
    pub looped: bool,
}

impl Layout {
    /// Bytes the device may write: the most a used length can say.
    pub fn writable_len(&self) -> u64 {
        self.descs
            .iter()
            .filter(|d| d.writable)
            .map(|d| u64::from(d.len))
            .sum()
    }
}

/// `len` bytes from `at` cut into `pieces` descriptors (the last takes
/// the remainder); `pieces` is at least one.
fn cut(at: u64, len: u64, pieces: usize, writable: bool) -> Vec<Desc> {
    let pieces = pieces.clamp(1, len.max(1) as usize);
    let step = len / pieces as u64;
    (0..pieces)
        .map(|i| {
            let start = step * i as u64;
            let end = if i + 1 == pieces { len } else { start + step };
            Desc {
                addr: at + start,
                len: (end - start) as u32,
                writable,
            }
        })
        .collect()
}

/// The same page `pieces` times, `len` bytes in all.
fn on_one_page(at: u64, len: u64, pieces: usize, writable: bool) -> Vec<Desc> {
    let mut descs = cut(at, len, pieces, writable);
    for d in &mut descs {
        d.addr = at;
    }
    descs
}

fn pieces(u: &mut Unstructured<'_>) -> Result<usize> {
    u.choose(&[1usize, 1, 1, 2, 3, 5, 16, 64, 255]).copied()
}

/// A layout of a `request_len`-byte request, `out_len` bytes of out-data,
/// a `reply_len`-byte reply at `reply_at` and `in_len` bytes of in-data.
/// Nothing but the reply's own descriptors covers the reply.
pub fn layout(
    u: &mut Unstructured<'_>,
    request_len: u64,
    out_len: u64,
    reply_at: u64,
    reply_len: u64,
    in_len: u64,
) -> Result<Layout> {
    let aliasing = *u.choose(&[
        Aliasing::None,
        Aliasing::None,
        Aliasing::None,
        Aliasing::OutOnOnePage,
        Aliasing::InOnOnePage,
        Aliasing::InOverOut,
        Aliasing::InOverRequest,
        Aliasing::HugeIn,
    ])?;
    let mut descs = cut(REQUEST_AT, request_len, pieces(u)?, false);
    let out_pieces = pieces(u)?;
    descs.extend(match aliasing {
        Aliasing::OutOnOnePage => on_one_page(OUT_AT, out_len.min(4096 * 255), out_pieces, false),
        _ => cut(OUT_AT, out_len, out_pieces, false),
    });
    let reply = cut(reply_at, reply_len, pieces(u)?, true);
    descs.extend(reply.iter().copied());
    let in_pieces = pieces(u)?;
    descs.extend(match aliasing {
        Aliasing::InOnOnePage => on_one_page(IN_AT, in_len.min(4096 * 255), in_pieces, true),
        Aliasing::InOverOut => cut(OUT_AT, in_len, in_pieces, true),
        Aliasing::InOverRequest => cut(REQUEST_AT, in_len, in_pieces, true),
        Aliasing::HugeIn => {
            let count = u.int_in_range(1..=MAX_CHAIN_DESCRIPTORS - descs.len().min(64) - 1)?;
            vec![
                Desc {
                    addr: IN_AT,
                    len: (RAM - IN_AT) as u32,
                    writable: true,
                };
                count.min(MAX_CHAIN_DESCRIPTORS - descs.len())
            ]
        }
        _ => cut(IN_AT, in_len, in_pieces, true),
    });
    descs.retain(|d| d.len > 0);
    let mut looped = false;
    let damage = if u.is_empty() {
        Damage::None
    } else {
        *u.choose(&[
            Damage::None,
            Damage::None,
            Damage::None,
            Damage::None,
            Damage::None,
            Damage::None,
            Damage::OutOfRange,
            Damage::HugeLength,
            Damage::ReadableAfterWritable,
            Damage::ZeroLength,
            Damage::Loop,
            Damage::TooLong,
            Damage::AtTheLimit,
        ])?
    };
    let at = if descs.is_empty() {
        0
    } else {
        u.int_in_range(0..=descs.len() - 1)?
    };
    match damage {
        Damage::None => {}
        Damage::OutOfRange => {
            if let Some(d) = descs.get_mut(at) {
                d.addr = RAM - u64::from(u.int_in_range(0u16..=64)?);
                d.len = d.len.max(65);
            }
        }
        Damage::HugeLength => {
            if let Some(d) = descs.get_mut(at) {
                d.len = u32::MAX;
            }
        }
        Damage::ReadableAfterWritable => descs.push(Desc {
            addr: OUT_AT,
            len: 16,
            writable: false,
        }),
        Damage::ZeroLength => {
            let zero = Desc {
                addr: u.arbitrary()?,
                len: 0,
                writable: u.arbitrary()?,
            };
            descs.insert(at, zero);
        }
        Damage::Loop => looped = true,
        Damage::TooLong | Damage::AtTheLimit => {
            let want = MAX_CHAIN_DESCRIPTORS + usize::from(damage == Damage::TooLong);
            let filler = Desc {
                addr: IN_AT,
                len: 1,
                writable: true,
            };
            while descs.len() < want {
                descs.push(filler);
            }
        }
    }
    Ok(Layout {
        descs,
        reply,
        looped,
    })
}
