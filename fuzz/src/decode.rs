//! `protocol_decode`: every decoder a guest's bytes reach before the
//! backend does anything with them. Any input gives a value or an error;
//! a value re-encodes to exactly the bytes it came from (the encoding is
//! canonical), and the framing scanners agree with the decoder.

use vgpu_protocol::codec::Writer;
use vgpu_protocol::cuda::{
    check_image, CuDeviceInfoReply, CuElapsedReply, CuFunctionReply, CuInitReply, CuIntReply,
    CuMemInfoReply, CuRangeReply, ImageKind,
};
use vgpu_protocol::frame::{scan_opcodes, BatchHeader, MSG_HEADER_LEN};
use vgpu_protocol::limits::MAX_BATCH_COUNT;
use vgpu_protocol::messages::{SessionOpened, SessionStatsReply};
use vgpu_protocol::{decode, decode_reply, Request, Wire};

/// Opcode ranges tried on every payload: all known opcodes and unknown
/// neighbours of each family.
const OPCODE_RANGES: &[std::ops::RangeInclusive<u32>] =
    &[0x0000..=0x0006, 0x1000..=0x1044, 0x2000..=0x2068];

/// A payload decoded under `opcode`: Ok values must re-encode to `payload`.
fn payload_round_trip(opcode: u32, payload: &[u8]) {
    if let Ok(request) = Request::decode(opcode, payload) {
        assert_eq!(request.opcode(), opcode);
        let mut w = Writer::new();
        request.encode_payload(&mut w);
        assert_eq!(w.bytes, payload, "{} is not canonical", request.name());
    }
}

fn wire_round_trip<T: Wire + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(value) = T::from_bytes(data) {
        assert_eq!(value.to_bytes(), data);
    }
}

/// The whole target.
pub fn protocol_decode(data: &[u8]) {
    // The request stream: framing, then each message's payload on its own.
    let scanned = scan_opcodes(data);
    match decode(data) {
        Ok(batch) => {
            assert_eq!(batch.messages.len(), batch.header.count as usize);
            assert!(batch.messages.len() <= MAX_BATCH_COUNT as usize);
            let opcodes: Vec<u32> = batch.messages.iter().map(|m| m.opcode).collect();
            assert_eq!(scanned, opcodes, "scan_opcodes disagrees with decode");
            for message in &batch.messages {
                if let Ok(request) = &message.body {
                    assert_eq!(request.opcode(), message.opcode);
                }
            }
        }
        Err(_) => {
            // The scanner never reports more messages than the header says.
            if let Ok(header) = BatchHeader::decode(data) {
                assert!(scanned.len() <= header.count as usize);
            } else {
                assert!(scanned.is_empty());
            }
        }
    }

    // The reply stream (what a guest library decodes).
    if let Ok(reply) = decode_reply(data) {
        assert!(reply.records.len() <= MAX_BATCH_COUNT as usize);
    }

    // The input as a payload of every opcode, and as the payload that
    // follows a message header (the usual case inside a batch).
    for range in OPCODE_RANGES {
        for opcode in range.clone() {
            payload_round_trip(opcode, data);
        }
    }
    if data.len() >= 4 {
        let opcode = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        payload_round_trip(opcode, &data[4..]);
    }
    if data.len() > MSG_HEADER_LEN {
        payload_round_trip(
            u32::from_le_bytes([data[0], data[1], data[2], data[3]]),
            &data[MSG_HEADER_LEN..],
        );
    }

    // Reply payloads.
    wire_round_trip::<SessionOpened>(data);
    wire_round_trip::<SessionStatsReply>(data);
    wire_round_trip::<CuInitReply>(data);
    wire_round_trip::<CuDeviceInfoReply>(data);
    wire_round_trip::<CuMemInfoReply>(data);
    wire_round_trip::<CuRangeReply>(data);
    wire_round_trip::<CuFunctionReply>(data);
    wire_round_trip::<CuIntReply>(data);
    wire_round_trip::<CuElapsedReply>(data);

    // CUDA module images: the backend checks a guest's image before the
    // driver parses it.
    if let Some(kind) = ImageKind::detect(data) {
        let _ = check_image(kind, data);
    }
    for kind in [ImageKind::Ptx, ImageKind::Cubin, ImageKind::Fatbin] {
        let _ = check_image(kind, data);
    }
}
