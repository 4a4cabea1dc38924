use vgpu_protocol::frame::{ReplyBuilder, BATCH_HEADER_LEN};
use vgpu_protocol::messages::*;
use vgpu_protocol::*;

fn sample_requests() -> Vec<Request> {
    vec![
        OpenSession {
            min_version: 1,
            max_version: 1,
            flags: 0,
        }
        .into(),
        CreateContext {
            context: 1,
            properties: vec![],
        }
        .into(),
        CreateBuffer {
            mem: 7,
            context: 1,
            flags: 1,
            size: 4096,
            init: DataRef {
                offset: 0,
                len: 4096,
            },
        }
        .into(),
        CreateProgramWithSource {
            program: 3,
            context: 1,
            source: b"kernel void k(){}".to_vec(),
        }
        .into(),
        SetKernelArg {
            kernel: 4,
            index: 0,
            arg_kind: 2,
            size: 8,
            value: vec![],
            handle: 7,
        }
        .into(),
        EnqueueNdRange {
            queue: 2,
            kernel: 4,
            work_dim: 1,
            offset: [0; 3],
            global: [1024, 1, 1],
            local: [64, 1, 1],
            wait: vec![9, 10],
            event: 11,
        }
        .into(),
        Finish { queue: 2 }.into(),
    ]
}

#[test]
fn batch_round_trips_every_message() {
    let mut builder = BatchBuilder::new(0);
    let requests = sample_requests();
    for (seq, req) in requests.iter().enumerate() {
        builder.push(seq as u64, req);
    }
    let bytes = builder.finish(42, 4096);
    let batch = decode(&bytes).unwrap();
    assert_eq!(batch.header.session, 42);
    assert_eq!(batch.header.reply_capacity, 4096);
    assert_eq!(batch.messages.len(), requests.len());
    for (i, (msg, req)) in batch.messages.iter().zip(&requests).enumerate() {
        assert_eq!(msg.seq, i as u64);
        assert_eq!(msg.opcode, req.opcode());
        assert_eq!(msg.body.as_ref().unwrap(), req);
    }
}

#[test]
fn truncating_to_a_mark_drops_only_the_later_messages() {
    let requests = sample_requests();
    let mut whole = BatchBuilder::new(0);
    let mut undone = BatchBuilder::new(0);
    whole.push(0, &requests[0]);
    undone.push(0, &requests[0]);
    let mark = undone.mark();
    for (seq, req) in requests.iter().enumerate().skip(1) {
        undone.push(seq as u64, req);
    }
    undone.truncate(mark);
    assert_eq!(undone.len(), 1);
    assert_eq!(undone.finish(7, 64), whole.finish(7, 64));
}

#[test]
fn decode_rejects_truncated_header() {
    let bytes = BatchBuilder::new(0).finish(1, 64);
    assert!(decode(&bytes[..BATCH_HEADER_LEN - 1]).is_err());
}

#[test]
fn decode_rejects_request_len_mismatch() {
    let mut builder = BatchBuilder::new(0);
    builder.push(0, &Ping {}.into());
    let bytes = builder.finish(1, 64);
    assert!(decode(&bytes[..bytes.len() - 8]).is_err());
}

#[test]
fn unknown_opcode_spoils_only_its_message() {
    let mut builder = BatchBuilder::new(0);
    builder.push(0, &Ping {}.into());
    builder.push(1, &Ping {}.into());
    let mut bytes = builder.finish(1, 64);
    // First message's opcode sits right after the batch header.
    bytes[BATCH_HEADER_LEN..BATCH_HEADER_LEN + 4].copy_from_slice(&0x7777u32.to_le_bytes());
    let batch = decode(&bytes).unwrap();
    assert_eq!(
        batch.messages[0].body,
        Err(DecodeError::UnknownOpcode(0x7777))
    );
    assert_eq!(batch.messages[1].body, Ok(Ping {}.into()));
}

#[test]
fn decode_rejects_payload_length_beyond_stream() {
    let mut builder = BatchBuilder::new(0);
    builder.push(0, &Ping {}.into());
    let mut bytes = builder.finish(1, 64);
    let at = BATCH_HEADER_LEN + 16;
    bytes[at..at + 4].copy_from_slice(&1_000_000u32.to_le_bytes());
    assert!(matches!(decode(&bytes), Err(DecodeError::Truncated { .. })));
}

#[test]
fn decode_rejects_oversized_count() {
    let mut bytes = BatchBuilder::new(0).finish(1, 64);
    bytes[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(decode(&bytes), Err(DecodeError::TooLong { .. })));
}

#[test]
fn decode_is_total_on_arbitrary_bytes() {
    // A deterministic sweep of mutations of a valid batch: every one must
    // decode to a batch or an error without panicking.
    let mut builder = BatchBuilder::new(0);
    for (seq, req) in sample_requests().iter().enumerate() {
        builder.push(seq as u64, req);
    }
    let valid = builder.finish(5, 1024);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut bytes = valid.clone();
        let at = (state as usize) % bytes.len();
        bytes[at] = (state >> 32) as u8;
        let cut = ((state >> 40) as usize) % (bytes.len() + 1);
        let _ = decode(&bytes[..cut]);
        let _ = decode(&bytes);
        let _ = decode_reply(&bytes);
    }
}

#[test]
fn reply_round_trips_and_marks_truncation() {
    let mut reply = ReplyBuilder::new(80);
    reply.push(opcode::GetInfo, 1, Status::SUCCESS, b"abc");
    reply.push(opcode::GetInfo, 2, Status::SUCCESS, &[0u8; 100]);
    let bytes = reply.finish();
    let parsed = decode_reply(&bytes).unwrap();
    assert!(parsed.truncated);
    assert_eq!(parsed.records[0].payload, b"abc");
    assert_eq!(parsed.records[1].status, Status::OUT_OF_RESOURCES);
}

#[test]
fn a_record_status_set_after_later_records_is_the_one_decoded() {
    let mut reply = ReplyBuilder::new(4096);
    reply.push(opcode::GetInfo, 1, Status::SUCCESS, b"abc");
    reply.push(opcode::GetInfo, 2, Status::SUCCESS, &[7u8; 9]);
    reply.push(opcode::GetInfo, 3, Status::SUCCESS, b"");
    assert_eq!(
        reply.set_status(1, Status::OUT_OF_RESOURCES),
        Some(opcode::GetInfo)
    );
    assert_eq!(
        reply.set_status(2, Status::INVALID_OPERATION),
        Some(opcode::GetInfo)
    );
    assert_eq!(reply.set_status(3, Status::INVALID_OPERATION), None);
    let bytes = reply.finish();
    assert_eq!(vgpu_protocol::frame::reply_len(&bytes), Some(bytes.len()));
    assert_eq!(vgpu_protocol::frame::reply_len(&bytes[..15]), None);
    let parsed = decode_reply(&bytes).unwrap();
    let statuses: Vec<Status> = parsed.records.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            Status::SUCCESS,
            Status::OUT_OF_RESOURCES,
            Status::INVALID_OPERATION
        ]
    );
    assert_eq!(parsed.records[1].payload, [7u8; 9]);
    assert_eq!(parsed.records[2].seq, 3);
}

#[test]
fn scan_opcodes_lists_messages_without_decoding() {
    let mut builder = BatchBuilder::new(0);
    for (seq, req) in sample_requests().iter().enumerate() {
        builder.push(seq as u64, req);
    }
    let bytes = builder.finish(1, 64);
    let expected: Vec<u32> = sample_requests().iter().map(Request::opcode).collect();
    assert_eq!(vgpu_protocol::frame::scan_opcodes(&bytes), expected);
    assert!(vgpu_protocol::frame::scan_opcodes(&bytes[..10]).is_empty());
}

#[test]
fn a_framing_error_in_the_last_message_refuses_the_batch_before_any_runs() {
    // The backend runs messages as they are decoded: a stream broken
    // anywhere must be refused by `frame` before the first one is seen.
    let mut builder = BatchBuilder::new(0);
    builder.push(0, &Ping {}.into());
    builder.push(1, &Ping {}.into());
    let mut bytes = builder.finish(1, 64);
    let framed = vgpu_protocol::frame::frame(&bytes).expect("valid stream");
    assert_eq!(framed.messages().count(), 2);
    assert_eq!(
        framed.messages().map(|m| m.seq).collect::<Vec<_>>(),
        decode(&bytes)
            .unwrap()
            .messages
            .iter()
            .map(|m| m.seq)
            .collect::<Vec<_>>()
    );
    // The second message's payload length now runs past the stream.
    let second = BATCH_HEADER_LEN + 24 + 16;
    bytes[second..second + 4].copy_from_slice(&1_000_000u32.to_le_bytes());
    assert!(matches!(
        vgpu_protocol::frame::frame(&bytes),
        Err(DecodeError::Truncated { .. })
    ));
}
