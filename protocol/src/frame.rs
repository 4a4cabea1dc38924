//! Batch and reply framing (see the README for the byte layout).

use crate::codec::{padding8, Reader, Writer};
use crate::limits::{MAX_BATCH_COUNT, MAX_REPLY_LEN, MAX_REQUEST_LEN};
use crate::messages::Request;
use crate::status::Status;
use crate::DecodeError;

pub const BATCH_MAGIC: u32 = 0x5550_4756; // "VGPU"
pub const REPLY_MAGIC: u32 = 0x5250_4756; // "VGPR"
pub const PROTOCOL_VERSION: u16 = 1;
pub const MIN_PROTOCOL_VERSION: u16 = 1;
pub const BATCH_HEADER_LEN: usize = 32;
pub const MSG_HEADER_LEN: usize = 24;
pub const REPLY_HEADER_LEN: usize = 24;
pub const RECORD_HEADER_LEN: usize = 24;

/// Batch flag: the guest library runs in strict (synchronous) mode.
pub const BATCH_FLAG_STRICT: u16 = 1;
/// Reply flag: the reply did not fit in `reply_capacity`.
pub const REPLY_FLAG_TRUNCATED: u16 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchHeader {
    pub version: u16,
    pub flags: u16,
    pub session: u64,
    pub count: u32,
    pub request_len: u32,
    pub reply_capacity: u32,
}

impl BatchHeader {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(BATCH_MAGIC);
        w.u16(self.version);
        w.u16(self.flags);
        w.u64(self.session);
        w.u32(self.count);
        w.u32(self.request_len);
        w.u32(self.reply_capacity);
        w.u32(0);
    }

    /// Decodes and bounds-checks the first 32 bytes of a request stream.
    pub fn decode(bytes: &[u8]) -> Result<BatchHeader, DecodeError> {
        let mut r = Reader::new(bytes);
        let magic = r.u32()?;
        if magic != BATCH_MAGIC {
            return Err(DecodeError::BadMagic(magic));
        }
        let header = BatchHeader {
            version: r.u16()?,
            flags: r.u16()?,
            session: r.u64()?,
            count: r.u32()?,
            request_len: r.u32()?,
            reply_capacity: r.u32()?,
        };
        let _reserved = r.u32()?;
        if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&header.version) {
            return Err(DecodeError::UnsupportedVersion(header.version));
        }
        if header.count > MAX_BATCH_COUNT {
            return Err(DecodeError::TooLong {
                len: header.count.into(),
                max: MAX_BATCH_COUNT.into(),
            });
        }
        if header.request_len > MAX_REQUEST_LEN || (header.request_len as usize) < BATCH_HEADER_LEN
        {
            return Err(DecodeError::BadHeader("request_len out of range"));
        }
        if header.reply_capacity > MAX_REPLY_LEN
            || (header.reply_capacity as usize) < REPLY_HEADER_LEN
        {
            return Err(DecodeError::BadHeader("reply_capacity out of range"));
        }
        Ok(header)
    }
}

/// One framed message; its body is decoded on its own, so a bad message does
/// not spoil the rest of its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub opcode: u32,
    pub flags: u32,
    pub seq: u64,
    pub body: Result<Request, DecodeError>,
}

/// A decoded request stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub header: BatchHeader,
    pub messages: Vec<Message>,
}

/// Decodes a whole request stream. Total: any input gives a batch or an error.
pub fn decode(bytes: &[u8]) -> Result<Batch, DecodeError> {
    let framed = frame(bytes)?;
    Ok(Batch {
        header: framed.header,
        messages: framed.messages().collect(),
    })
}

/// A request stream whose header and message framing were checked; its
/// messages are decoded one at a time by [`Framed::messages`]. The backend
/// runs batches this way: collecting them first moved every decoded
/// request (176 bytes) two or three times, a fifth of the backend's time
/// in a run of deferred `clSetKernelArg` calls.
#[derive(Debug, Clone, Copy)]
pub struct Framed<'a> {
    pub header: BatchHeader,
    body: &'a [u8],
}

/// Checks a request stream's header and the framing of all its messages,
/// decoding no payload: the same errors as [`decode`], before any message
/// is looked at.
pub fn frame(bytes: &[u8]) -> Result<Framed<'_>, DecodeError> {
    let header = BatchHeader::decode(bytes)?;
    if header.request_len as usize != bytes.len() {
        return Err(DecodeError::BadHeader(
            "request_len differs from the stream length",
        ));
    }
    let body = &bytes[BATCH_HEADER_LEN..];
    let mut r = Reader::new(body);
    for _ in 0..header.count {
        next_frame(&mut r)?;
    }
    r.finish()?;
    Ok(Framed { header, body })
}

impl<'a> Framed<'a> {
    /// The messages in order, each decoded when it is reached.
    pub fn messages(&self) -> FramedMessages<'a> {
        FramedMessages {
            r: Reader::new(self.body),
            left: self.header.count,
        }
    }
}

/// The messages of a [`Framed`] stream.
pub struct FramedMessages<'a> {
    r: Reader<'a>,
    left: u32,
}

impl Iterator for FramedMessages<'_> {
    type Item = Message;

    fn next(&mut self) -> Option<Message> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Checked by `frame`: a framing error cannot happen here.
        let (opcode, flags, seq, payload) = next_frame(&mut self.r).ok()?;
        Some(Message {
            opcode,
            flags,
            seq,
            body: Request::decode(opcode, payload),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// One message's frame: (opcode, flags, seq, payload), the reader moved
/// past its padding.
fn next_frame<'a>(r: &mut Reader<'a>) -> Result<(u32, u32, u64, &'a [u8]), DecodeError> {
    let opcode = r.u32()?;
    let flags = r.u32()?;
    let seq = r.u64()?;
    let payload_len = r.u32()? as usize;
    let _reserved = r.u32()?;
    let payload = r.take(payload_len)?;
    r.take(padding8(payload_len).min(r.remaining()))?;
    Ok((opcode, flags, seq, payload))
}

/// The opcodes of a request stream's messages, without decoding payloads;
/// stops at the first framing error.
pub fn scan_opcodes(bytes: &[u8]) -> Vec<u32> {
    opcodes(bytes).collect()
}

/// [`scan_opcodes`] as an iterator: a look at the opcodes allocates
/// nothing (the backend looks at every batch's before running it).
pub fn opcodes(bytes: &[u8]) -> Opcodes<'_> {
    match BatchHeader::decode(bytes) {
        Ok(header) => Opcodes {
            r: Reader::new(bytes.get(BATCH_HEADER_LEN..).unwrap_or_default()),
            left: header.count,
        },
        Err(_) => Opcodes {
            r: Reader::new(&[]),
            left: 0,
        },
    }
}

/// The iterator of [`opcodes`].
pub struct Opcodes<'a> {
    r: Reader<'a>,
    left: u32,
}

impl Iterator for Opcodes<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let r = &mut self.r;
        let framed = r.u32().and_then(|opcode| {
            let len = r.take(12).and_then(|_| r.u32())?;
            r.u32()?;
            Ok((opcode, len as usize))
        });
        let Ok((opcode, len)) = framed else {
            self.left = 0;
            return None;
        };
        if r.take(len).is_err() {
            // The message is cut short: it is the last one listed.
            self.left = 0;
        } else {
            let _ = r.take(padding8(len).min(r.remaining()));
        }
        Some(opcode)
    }
}

/// A point in a [`BatchBuilder`]'s stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMark {
    len: usize,
    count: u32,
}

/// Builds a request stream (guest side).
#[derive(Debug)]
pub struct BatchBuilder {
    body: Writer,
    count: u32,
    flags: u16,
}

impl BatchBuilder {
    pub fn new(flags: u16) -> Self {
        BatchBuilder {
            body: Writer::new(),
            count: 0,
            flags,
        }
    }

    pub fn len(&self) -> u32 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size so far, batch header included.
    pub fn encoded_len(&self) -> usize {
        BATCH_HEADER_LEN + self.body.bytes.len()
    }

    /// Where the batch ends now, for [`BatchBuilder::truncate`].
    pub fn mark(&self) -> BatchMark {
        BatchMark {
            len: self.body.bytes.len(),
            count: self.count,
        }
    }

    /// Drops the messages pushed after `mark` (one that turned out not to
    /// fit, so a message is encoded once rather than measured first).
    pub fn truncate(&mut self, mark: BatchMark) {
        self.body.bytes.truncate(mark.len);
        self.count = mark.count;
    }

    pub fn push(&mut self, seq: u64, request: &Request) {
        let start = self.body.bytes.len();
        self.body.u32(request.opcode());
        self.body.u32(0);
        self.body.u64(seq);
        self.body.u32(0); // payload length, patched below
        self.body.u32(0);
        let payload_start = self.body.bytes.len();
        request.encode_payload(&mut self.body);
        let payload_len = u32::try_from(self.body.bytes.len() - payload_start)
            .expect("payloads are bounded by MAX_BYTES_FIELD");
        self.body.bytes[start + 16..start + 20].copy_from_slice(&payload_len.to_le_bytes());
        self.body.pad8();
        self.count += 1;
    }

    /// The finished request stream.
    pub fn finish(&self, session: u64, reply_capacity: u32) -> Vec<u8> {
        let mut stream = Vec::new();
        self.finish_into(session, reply_capacity, &mut stream);
        stream
    }

    /// [`BatchBuilder::finish`] into `stream` (emptied first), reusing its
    /// room: a guest library seals a batch per synchronous call.
    pub fn finish_into(&self, session: u64, reply_capacity: u32, stream: &mut Vec<u8>) {
        let header = BatchHeader {
            version: PROTOCOL_VERSION,
            flags: self.flags,
            session,
            count: self.count,
            request_len: u32::try_from(self.encoded_len()).expect("batches stay under 4 GiB"),
            reply_capacity,
        };
        let mut w = Writer {
            bytes: std::mem::take(stream),
        };
        w.bytes.clear();
        w.bytes.reserve(self.encoded_len());
        header.encode(&mut w);
        w.raw(&self.body.bytes);
        *stream = w.bytes;
    }

    pub fn clear(&mut self) {
        self.body.bytes.clear();
        self.count = 0;
    }
}

/// Bytes a reply reserves at first (at most its capacity).
const REPLY_RESERVE: usize = 512;

/// Reply records in the order their messages ran (backend side).
#[derive(Debug)]
pub struct ReplyBuilder {
    w: Writer,
    count: u32,
    capacity: usize,
    truncated: bool,
    status: Status,
    earlier: Status,
}

impl ReplyBuilder {
    pub fn new(capacity: u32) -> Self {
        let mut w = Writer::new();
        // Room for a few small records up front: a reply grown from empty
        // was reallocated two or three times per batch.
        w.bytes
            .reserve((capacity as usize).clamp(REPLY_HEADER_LEN, REPLY_RESERVE));
        w.bytes.resize(REPLY_HEADER_LEN, 0);
        ReplyBuilder {
            w,
            count: 0,
            capacity: capacity as usize,
            truncated: false,
            status: Status::SUCCESS,
            earlier: Status::SUCCESS,
        }
    }

    /// Reports the failure of a call of an earlier batch, answered before
    /// the backend knew its outcome (see [`Reply::earlier`]).
    pub fn set_earlier(&mut self, status: Status) {
        self.earlier = status;
    }

    /// A reply that refuses a whole batch.
    pub fn refused(status: Status) -> Vec<u8> {
        let mut builder = ReplyBuilder::new(REPLY_HEADER_LEN as u32);
        builder.status = status;
        builder.finish()
    }

    /// Appends a record; when it does not fit, a record without payload and
    /// `OUT_OF_RESOURCES` is written instead and the reply is marked truncated.
    pub fn push(&mut self, opcode: u32, seq: u64, status: Status, payload: &[u8]) {
        let full = RECORD_HEADER_LEN + payload.len() + padding8(payload.len());
        let (status, payload) = if self.w.bytes.len() + full <= self.capacity {
            (status, payload)
        } else {
            self.truncated = true;
            (Status::OUT_OF_RESOURCES, &[][..])
        };
        if self.w.bytes.len() + RECORD_HEADER_LEN > self.capacity {
            return;
        }
        self.w.u32(opcode);
        self.w.i32(status.0);
        self.w.u64(seq);
        self.w.u32(payload.len() as u32);
        self.w.u32(0);
        self.w.raw(payload);
        self.w.pad8();
        self.count += 1;
    }

    /// Changes the status of record `index` (in push order), for a call
    /// whose outcome was only known after later records were pushed (work
    /// the backend handed to another thread), and returns the record's
    /// opcode. Records that were dropped for want of room are left as they
    /// are (`None`).
    pub fn set_status(&mut self, index: usize, status: Status) -> Option<u32> {
        if index >= self.count as usize {
            return None;
        }
        let bytes = &mut self.w.bytes;
        let mut at = REPLY_HEADER_LEN;
        for _ in 0..index {
            let len = u32::from_le_bytes(bytes[at + 16..at + 20].try_into().expect("4 bytes"));
            at += RECORD_HEADER_LEN + len as usize + padding8(len as usize);
        }
        bytes[at + 4..at + 8].copy_from_slice(&status.0.to_le_bytes());
        Some(u32::from_le_bytes(
            bytes[at..at + 4].try_into().expect("4 bytes"),
        ))
    }

    pub fn finish(mut self) -> Vec<u8> {
        let flags = if self.truncated {
            REPLY_FLAG_TRUNCATED
        } else {
            0
        };
        let len = self.w.bytes.len() as u32;
        let header = &mut self.w.bytes[..REPLY_HEADER_LEN];
        header[0..4].copy_from_slice(&REPLY_MAGIC.to_le_bytes());
        header[4..6].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        header[6..8].copy_from_slice(&flags.to_le_bytes());
        header[8..12].copy_from_slice(&self.count.to_le_bytes());
        header[12..16].copy_from_slice(&len.to_le_bytes());
        header[16..20].copy_from_slice(&self.status.0.to_le_bytes());
        header[20..24].copy_from_slice(&self.earlier.0.to_le_bytes());
        self.w.bytes
    }
}

/// One reply record (guest side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyRecord {
    pub opcode: u32,
    pub status: Status,
    pub seq: u64,
    pub payload: Vec<u8>,
}

/// A decoded reply stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub truncated: bool,
    pub status: Status,
    /// Success, or the failure of a call of an earlier batch of the
    /// session that was answered before the call ran (the backend finishes
    /// some deferred calls, such as kernel launches, after answering their
    /// batch). The guest reports it as a deferred call's failure.
    pub earlier: Status,
    pub records: Vec<ReplyRecord>,
}

/// The length a reply's header gives (header included), from its first
/// `REPLY_HEADER_LEN` bytes; `None` when they are fewer. Unchecked: a
/// reader clamps it to what it has.
pub fn reply_len(header: &[u8]) -> Option<usize> {
    let bytes = header.get(12..16)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?) as usize)
}

/// Decodes a reply stream (guest side); total like `decode`.
pub fn decode_reply(bytes: &[u8]) -> Result<Reply, DecodeError> {
    let mut r = Reader::new(bytes);
    let magic = r.u32()?;
    if magic != REPLY_MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    let version = r.u16()?;
    if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&version) {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let flags = r.u16()?;
    let count = r.u32()?;
    let reply_len = r.u32()? as usize;
    let status = Status(r.i32()?);
    let earlier = Status(r.i32()?);
    if count > MAX_BATCH_COUNT || reply_len > bytes.len() || reply_len < REPLY_HEADER_LEN {
        return Err(DecodeError::BadHeader("reply count or length out of range"));
    }
    let mut r = Reader::new(&bytes[REPLY_HEADER_LEN..reply_len]);
    let mut records = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let opcode = r.u32()?;
        let status = Status(r.i32()?);
        let seq = r.u64()?;
        let len = r.u32()? as usize;
        let _reserved = r.u32()?;
        let payload = r.take(len)?.to_vec();
        r.take(padding8(len).min(r.remaining()))?;
        records.push(ReplyRecord {
            opcode,
            status,
            seq,
            payload,
        });
    }
    Ok(Reply {
        truncated: flags & REPLY_FLAG_TRUNCATED != 0,
        status,
        earlier,
        records,
    })
}
