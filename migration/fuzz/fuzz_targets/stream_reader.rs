//! Raw bytes into the stream reader: every input is an error or a stream,
//! never a panic, a hang or an unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vgpu_migration::{Item, StreamReader};

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = StreamReader::new(data) else {
        return;
    };
    while let Ok(Some(item)) = reader.next_item() {
        if let Item::End(summary) = item {
            assert_eq!(summary.stream_bytes, data.len() as u64);
        }
    }
});
