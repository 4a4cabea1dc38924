//! The integrity check (`d4082055-…`, slot 1) and the table whose address
//! it vouches for, the cudart interface (`6bd5fb6c-…`).
//!
//! cudart calls the check three times with versions N0, N1, N2 and the Unix
//! time; it compares the N2 answer with a hash it computes itself over what
//! it knows: an HMAC over MD2 (RFC 1319, RFC 2104) with a fixed key, of the
//! driver version, the version passed, the process id, the low 32 bits of
//! `pthread_self()`, the addresses of the two tables and of the check
//! function as it received them, the seconds passed, then each device's
//! UUID and PCI domain, bus and device. For N0 and N1 the driver answers
//! fixed values. Measured on driver 580 (`traces/README.md`): this hash
//! reproduces every answer the driver gave in the committed traces (unit
//! test), and the tracer answering it the same way for copied tables made
//! vecadd, CuPy and PyTorch pass. The inputs here are what this library
//! reports: its driver version, devices, UUIDs and PCI numbers.

use std::ffi::{c_int, c_void};

use super::{not_supported, size_word, Table};
use crate::api::{context, device};
use crate::ffi::{guard, put, CUdevice, CUresult, CuResult, Handle};

/// MD2's substitution table, from the digits of pi (RFC 1319).
const S: [u8; 256] = [
    41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19, 98, 167, 5, 243, 192, 199,
    115, 140, 152, 147, 43, 217, 188, 76, 130, 202, 30, 155, 87, 60, 253, 212, 224, 22, 103, 66,
    111, 24, 138, 23, 229, 18, 190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47,
    238, 122, 169, 104, 121, 145, 21, 178, 7, 63, 148, 194, 16, 137, 11, 34, 95, 33, 128, 127, 93,
    154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3, 255, 25, 48, 179, 72, 165, 181, 209,
    215, 94, 146, 42, 172, 86, 170, 198, 79, 184, 56, 210, 150, 164, 125, 182, 118, 252, 107, 226,
    156, 116, 4, 241, 69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2, 27,
    96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15, 85, 71, 163, 35, 221, 81,
    175, 58, 195, 92, 249, 206, 186, 197, 234, 38, 44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205,
    244, 65, 129, 77, 82, 106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74,
    120, 136, 149, 139, 227, 99, 232, 109, 233, 203, 213, 254, 59, 0, 29, 57, 242, 239, 183, 14,
    102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10, 49, 68, 80, 180, 143, 237, 31, 26,
    219, 153, 141, 51, 159, 17, 131, 20,
];

/// MD2 (RFC 1319).
struct Md2 {
    state: [u8; 48],
    checksum: [u8; 16],
    block: [u8; 16],
    last: u8,
    len: usize,
}

impl Md2 {
    const fn new() -> Self {
        Self {
            state: [0; 48],
            checksum: [0; 16],
            block: [0; 16],
            last: 0,
            len: 0,
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.block[self.len] = b;
            self.len += 1;
            if self.len == 16 {
                self.compress();
                self.len = 0;
            }
        }
    }

    fn compress(&mut self) {
        for j in 0..16 {
            self.state[16 + j] = self.block[j];
            self.state[32 + j] = self.state[j] ^ self.block[j];
            self.checksum[j] ^= S[usize::from(self.block[j] ^ self.last)];
            self.last = self.checksum[j];
        }
        let mut t = 0u8;
        for round in 0..18u8 {
            for x in &mut self.state {
                *x ^= S[usize::from(t)];
                t = *x;
            }
            t = t.wrapping_add(round);
        }
    }

    fn finish(mut self) -> [u8; 16] {
        let pad = 16 - self.len;
        self.update(&[pad as u8; 16][..pad]);
        let checksum = self.checksum;
        self.update(&checksum);
        let mut digest = [0u8; 16];
        digest.copy_from_slice(&self.state[..16]);
        digest
    }
}

fn md2(parts: &[&[u8]]) -> [u8; 16] {
    let mut m = Md2::new();
    for part in parts {
        m.update(part);
    }
    m.finish()
}

/// HMAC (RFC 2104) over MD2, whose block is 16 bytes: the key's size.
fn hmac_md2(key: &[u8; 16], message: &[u8]) -> [u8; 16] {
    let inner_key = key.map(|b| b ^ 0x36);
    let outer_key = key.map(|b| b ^ 0x5c);
    let inner = md2(&[&inner_key, message]);
    md2(&[&outer_key, &inner])
}

const KEY: [u8; 16] = [
    0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
];

/// The driver's fixed answers for versions ending in 0 and 1.
const FIXED: [[u64; 2]; 2] = [
    [0x3341_181c_03cb_675c, 0x8ed3_83aa_1f4c_d1e8],
    [0x1841_181c_03cb_675c, 0x8ed3_83aa_1f4c_d1e8],
];

/// What one check hashes, besides the devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckInput {
    pub driver_version: u32,
    pub version: u32,
    pub process: u32,
    pub thread: u32,
    pub cudart_table: u64,
    pub integrity_table: u64,
    pub check_fn: u64,
    pub seconds: u64,
}

/// One device as the check hashes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceId {
    pub uuid: [u8; 16],
    pub pci_domain: i32,
    pub pci_bus: i32,
    pub pci_device: i32,
}

/// The check's answer, as two native-endian u64 (the digest's bytes).
pub fn check_answer(input: &CheckInput, devices: &[DeviceId]) -> [u64; 2] {
    match input.version % 10 {
        0 => return FIXED[0],
        1 => return FIXED[1],
        _ => {}
    }
    let mut message = Vec::with_capacity(48 + 28 * devices.len());
    for word in [
        input.driver_version,
        input.version,
        input.process,
        input.thread,
    ] {
        message.extend_from_slice(&word.to_ne_bytes());
    }
    for word in [
        input.cudart_table,
        input.integrity_table,
        input.check_fn,
        input.seconds,
    ] {
        message.extend_from_slice(&word.to_ne_bytes());
    }
    for device in devices {
        message.extend_from_slice(&device.uuid);
        for word in [device.pci_domain, device.pci_bus, device.pci_device] {
            message.extend_from_slice(&word.to_ne_bytes());
        }
    }
    let digest = hmac_md2(&KEY, &message);
    let (low, high) = digest.split_at(8);
    [
        u64::from_ne_bytes(low.try_into().expect("8 bytes")),
        u64::from_ne_bytes(high.try_into().expect("8 bytes")),
    ]
}

/// The devices as this library reports them (count, UUID, PCI numbers).
fn devices() -> CuResult<Vec<DeviceId>> {
    (0..device::device_count()?)
        .map(|d: CUdevice| {
            let (pci_domain, pci_bus, pci_device) = device::pci_address(d)?;
            Ok(DeviceId {
                uuid: device::uuid(d)?,
                pci_domain,
                pci_bus,
                pci_device,
            })
        })
        .collect()
}

extern "C" fn integrity_check(version: u32, seconds: u64, out: *mut [u64; 2]) -> CUresult {
    guard("integrity check", || {
        let input = CheckInput {
            driver_version: u32::try_from(device::driver_version()?).unwrap_or(0),
            version,
            process: std::process::id(),
            // SAFETY: pthread_self has no preconditions; the check hashes
            // its low 32 bits, as cudart does.
            thread: unsafe { libc::pthread_self() } as u32,
            cudart_table: CUDART_INTERFACE.0.as_ptr() as u64,
            integrity_table: INTEGRITY_CHECK.0.as_ptr() as u64,
            check_fn: INTEGRITY_CHECK.0[1] as u64,
            seconds,
        };
        put(out, check_answer(&input, &devices()?))
    })
}

pub static INTEGRITY_CHECK: Table<3> = Table::new([
    size_word::<3>(),
    integrity_check as *const c_void,
    not_supported as *const c_void,
]);

/// Slot 2: the primary context of `device`, without activating it (the
/// handle a later `cuDevicePrimaryCtxRetain` gives).
extern "C" fn primary_context(pctx: *mut Handle, device: c_int) -> CUresult {
    guard("cudart interface: primary context", || {
        put(pctx, context::primary_handle(device)?)
    })
}

const NS: *const c_void = not_supported as *const c_void;

/// Of its 13 words CUDA 13's cudart calls slot 2 only (the fat-binary
/// slots ZLUDA documents are not used: kernels come through cuLibrary*).
pub static CUDART_INTERFACE: Table<13> = Table::new([
    size_word::<13>(),
    NS,
    primary_context as *const c_void,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
]);

#[cfg(test)]
mod tests;
