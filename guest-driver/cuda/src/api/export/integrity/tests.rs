//! MD2 against RFC 1319, and the check against every answer the real
//! driver gave in the committed traces.

use super::*;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn md2_matches_rfc_1319() {
    let cases: [(&str, &str); 5] = [
        ("", "8350e5a3e24c153df2275c9f80692773"),
        ("a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"),
        ("abc", "da853b0d3f88d99b30283a69e6ded6bb"),
        ("message digest", "ab4f496bfb2a530b219ff33031fe06b0"),
        (
            "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
            "d5976f79d83d3a0dc9806c3c66f3efd8",
        ),
    ];
    for (text, digest) in cases {
        assert_eq!(hex(&md2(&[text.as_bytes()])), digest, "{text:?}");
    }
}

const TRACES: [&str; 4] = [
    include_str!("../../../../traces/vecadd-static.txt"),
    include_str!("../../../../traces/vecadd-shared.txt"),
    include_str!("../../../../traces/cupy.txt"),
    include_str!("../../../../traces/torch.txt"),
];

/// The lines of one `[section]` of a trace summary.
fn section<'a>(trace: &'a str, name: &str) -> Vec<&'a str> {
    trace
        .split(&format!("\n[{name}]"))
        .nth(1)
        .expect("the section")
        .lines()
        .skip(1)
        .take_while(|line| !line.is_empty())
        .collect()
}

fn number<T: std::str::FromStr>(word: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    word.parse().expect("a number")
}

fn address(word: &str) -> u64 {
    u64::from_str_radix(word.trim_start_matches("0x"), 16).expect("an address")
}

fn uuid(word: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&word[2 * i..2 * i + 2], 16).expect("hex");
    }
    out
}

#[test]
fn check_reproduces_every_answer_of_the_real_driver() {
    let mut hashed = 0;
    for trace in TRACES {
        let answers = section(trace, "integrity");
        let inputs = section(trace, "integrity-inputs");
        assert_eq!(answers.len(), inputs.len());
        assert!(!answers.is_empty());
        for (answer, input) in answers.iter().zip(&inputs) {
            // "version seconds result driver-answer ...": two u64 in hex.
            let words: Vec<&str> = answer.split_whitespace().collect();
            let driver = [address(&words[3][..16]), address(&words[3][16..])];
            // "driver version process thread cudart integrity fn seconds;
            //  N devices; uuid domain bus device"
            let (call, rest) = input.split_once(';').expect("call; devices");
            let device: Vec<&str> = rest
                .split(';')
                .nth(1)
                .expect("device")
                .split_whitespace()
                .collect();
            let w: Vec<&str> = call.split_whitespace().collect();
            let check = CheckInput {
                driver_version: number(w[0]),
                version: number(w[1]),
                process: number(w[2]),
                thread: number(w[3]),
                cudart_table: address(w[4]),
                integrity_table: address(w[5]),
                check_fn: address(w[6]),
                seconds: number(w[7]),
            };
            let devices = [DeviceId {
                uuid: uuid(device[0]),
                pci_domain: number(device[1]),
                pci_bus: number(device[2]),
                pci_device: number(device[3]),
            }];
            assert_eq!(check_answer(&check, &devices), driver, "{answer} / {input}");
            hashed += usize::from(check.version % 10 >= 2);
        }
    }
    assert!(hashed >= 4, "{hashed}");
}

#[test]
fn tables_have_their_size_word_and_functions() {
    assert_eq!(INTEGRITY_CHECK.0[0] as usize, 3 * 8);
    assert_eq!(CUDART_INTERFACE.0[0] as usize, 13 * 8);
    assert!(INTEGRITY_CHECK.0[1..].iter().all(|f| !f.is_null()));
    assert!(CUDART_INTERFACE.0[1..].iter().all(|f| !f.is_null()));
}
