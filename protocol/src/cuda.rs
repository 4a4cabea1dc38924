//! CUDA driver API on the wire: result codes (which travel unchanged in a
//! reply record's `status`), the reply payloads of the CUDA opcodes, and the
//! constants both sides must agree on. The request messages themselves are
//! listed with every other message in `messages.rs` (opcodes 0x2000–0x2fff).

use crate::codec::{Field, Reader, Writer};
use crate::messages::Wire;
use crate::{DecodeError, Status};

/// First and last opcode of the CUDA range.
pub const OPCODES: std::ops::RangeInclusive<u32> = 0x2000..=0x2fff;

/// Driver API version the guest library reports (`cuDriverGetVersion`) when
/// the host driver is newer: the API level the protocol implements.
pub const API_VERSION: u32 = 13000;

/// Kernel parameter buffers larger than this are refused (CUDA's own limit
/// is 32 764 bytes since 12.1).
pub const MAX_PARAM_BUFFER: usize = 32 * 1024;

/// Largest module image (a library's fat binary) the backend takes: larger
/// than one message, so images over [`IMAGE_CHUNK`] travel in chunks
/// (`CuImageChunk`) and load with `CuModuleLoadStaged`.
pub const MAX_IMAGE_LEN: u64 = 1 << 30;

/// Size of one `CuImageChunk`; an image up to this size goes whole in
/// `CuModuleLoad`.
pub const IMAGE_CHUNK: usize = 8 << 20;

/// Bytes of unfinished uploads one session may hold at a time.
pub const MAX_STAGED_BYTES: u64 = 2 << 30;

/// Device attributes the reply to `CuDeviceInfo` carries (indices `0..N`).
pub const DEVICE_ATTRIBUTE_COUNT: u32 = 160;

/// Most bytes of kernel output one reply carries (`CuTakeDeviceOutput`):
/// a reply this full may have more behind it.
pub const DEVICE_OUTPUT_CHUNK: usize = 128 << 10;

/// An attribute the device does not answer, in `CuDeviceInfoReply::attributes`.
/// No `int` attribute value widens to it: `u64::MAX`, the sentinel before,
/// is -1, which `CU_DEVICE_ATTRIBUTE_NUMA_ID` reads on a GPU without a NUMA
/// node (an H100 here), and cudart refused to start when that read failed.
pub const ATTRIBUTE_UNSUPPORTED: u64 = i64::MIN as u64;

/// Parameters of a kernel: `offset << 32 | size` per parameter.
pub fn pack_param(offset: u32, size: u32) -> u64 {
    (u64::from(offset) << 32) | u64::from(size)
}

/// Inverse of [`pack_param`]: `(offset, size)`.
pub fn unpack_param(packed: u64) -> (u32, u32) {
    ((packed >> 32) as u32, packed as u32)
}

macro_rules! results {
    ($($name:ident = $value:literal: $text:literal,)*) => {
        /// `CUresult` values.
        pub mod result {
            $(pub const $name: i32 = $value;)*
        }

        /// `cuGetErrorName`: `CUDA_ERROR_…` (or `CUDA_SUCCESS`).
        pub fn error_name(code: i32) -> Option<&'static str> {
            match code {
                $($value => Some(concat!("CUDA_", stringify!($name))),)*
                _ => None,
            }
        }

        /// `cuGetErrorString`: a one-line description.
        pub fn error_string(code: i32) -> Option<&'static str> {
            match code {
                $($value => Some($text),)*
                _ => None,
            }
        }
    };
}

results! {
    SUCCESS = 0: "no error",
    ERROR_INVALID_VALUE = 1: "invalid argument",
    ERROR_OUT_OF_MEMORY = 2: "out of memory",
    ERROR_NOT_INITIALIZED = 3: "initialization error",
    ERROR_DEINITIALIZED = 4: "driver shutting down",
    ERROR_NO_DEVICE = 100: "no CUDA-capable device is detected",
    ERROR_INVALID_DEVICE = 101: "invalid device ordinal",
    ERROR_INVALID_IMAGE = 200: "device kernel image is invalid",
    ERROR_INVALID_CONTEXT = 201: "invalid device context",
    ERROR_CONTEXT_ALREADY_CURRENT = 202: "context already current",
    ERROR_MAP_FAILED = 205: "mapping of buffer object failed",
    ERROR_UNMAP_FAILED = 206: "unmapping of buffer object failed",
    ERROR_NO_BINARY_FOR_GPU = 209: "no kernel image is available for execution on the device",
    ERROR_UNSUPPORTED_LIMIT = 215: "limit is not supported on this architecture",
    ERROR_INVALID_PTX = 218: "a PTX JIT compilation failed",
    ERROR_JIT_COMPILER_NOT_FOUND = 221: "PTX JIT compiler library not found",
    ERROR_UNSUPPORTED_PTX_VERSION = 222: "the provided PTX was compiled with an unsupported toolchain",
    ERROR_INVALID_SOURCE = 300: "device kernel image is invalid",
    ERROR_FILE_NOT_FOUND = 301: "file not found",
    ERROR_OPERATING_SYSTEM = 304: "OS call failed or operation not supported on this OS",
    ERROR_INVALID_HANDLE = 400: "invalid resource handle",
    ERROR_ILLEGAL_STATE = 401: "the operation cannot be performed in the present state",
    ERROR_NOT_FOUND = 500: "named symbol not found",
    ERROR_NOT_READY = 600: "device not ready",
    ERROR_ILLEGAL_ADDRESS = 700: "an illegal memory access was encountered",
    ERROR_LAUNCH_OUT_OF_RESOURCES = 701: "too many resources requested for launch",
    ERROR_LAUNCH_TIMEOUT = 702: "the launch timed out and was terminated",
    ERROR_PRIMARY_CONTEXT_ACTIVE = 708: "primary context active",
    ERROR_CONTEXT_IS_DESTROYED = 709: "context is destroyed",
    ERROR_ASSERT = 710: "device-side assert triggered",
    ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712: "part or all of the requested memory range is already mapped",
    ERROR_HOST_MEMORY_NOT_REGISTERED = 713: "pointer does not correspond to a registered memory region",
    ERROR_HARDWARE_STACK_ERROR = 714: "hardware stack error",
    ERROR_ILLEGAL_INSTRUCTION = 715: "an illegal instruction was encountered",
    ERROR_MISALIGNED_ADDRESS = 716: "misaligned address",
    ERROR_INVALID_ADDRESS_SPACE = 717: "operation not supported on global/shared address space",
    ERROR_INVALID_PC = 718: "invalid program counter",
    ERROR_LAUNCH_FAILED = 719: "unspecified launch failure",
    ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720: "too many blocks in cooperative launch",
    ERROR_NOT_PERMITTED = 800: "operation not permitted",
    ERROR_NOT_SUPPORTED = 801: "operation not supported",
    ERROR_SYSTEM_NOT_READY = 802: "system not yet initialized",
    ERROR_SYSTEM_DRIVER_MISMATCH = 803: "system has unsupported display driver / cuda driver combination",
    ERROR_STREAM_CAPTURE_UNSUPPORTED = 900: "operation not permitted when stream is capturing",
    ERROR_TIMEOUT = 909: "wait operation timed out",
    ERROR_UNKNOWN = 999: "unknown error",
}

/// A wire status as a `CUresult`. Framing and decoding errors travel as
/// OpenCL codes (negative): they become the nearest CUDA code.
pub fn to_cuda_result(status: Status) -> i32 {
    match status.0 {
        code if code >= 0 => code,
        c if c == Status::DEVICE_NOT_AVAILABLE.0 || c == Status::DEVICE_NOT_FOUND.0 => {
            result::ERROR_NO_DEVICE
        }
        c if c == Status::OUT_OF_HOST_MEMORY.0 || c == Status::OUT_OF_RESOURCES.0 => {
            result::ERROR_OUT_OF_MEMORY
        }
        c if c == Status::INVALID_OPERATION.0 => result::ERROR_NOT_SUPPORTED,
        _ => result::ERROR_INVALID_VALUE,
    }
}

/// A `CUresult` as a wire status.
pub fn status(code: i32) -> Status {
    Status(code)
}

/// The kind of a module image, as `cuModuleLoadData` tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ImageKind {
    /// PTX text: portable, JIT-compiled for any architecture.
    Ptx = 1,
    /// A device ELF: runs only on the architecture it was built for.
    Cubin = 2,
    /// A fat binary: one or more cubins, usually with PTX.
    Fatbin = 3,
}

/// Magic of a fat binary (`fatBinaryHeader`).
pub const FATBIN_MAGIC: u32 = 0xba55_ed50;
/// Magic of the wrapper nvcc places around an embedded fat binary.
pub const FATBIN_WRAPPER_MAGIC: u32 = 0x4662_43b1;
/// Magic of an ELF file.
pub const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];

impl ImageKind {
    /// Tells the kind from the first bytes of an image.
    pub fn detect(image: &[u8]) -> Option<ImageKind> {
        let word = image
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        if image.starts_with(&ELF_MAGIC) {
            Some(ImageKind::Cubin)
        } else if word == Some(FATBIN_MAGIC) || word == Some(FATBIN_WRAPPER_MAGIC) {
            Some(ImageKind::Fatbin)
        } else if image.iter().take(4096).any(|b| *b == b'.' || *b == b'/') {
            // PTX is text: directives (`.version`) and comments (`//`).
            Some(ImageKind::Ptx)
        } else {
            None
        }
    }
}

/// Reads `len` bytes at `offset` of an image whose length is not known yet.
pub type ImageReader<'a> = dyn FnMut(u64, usize) -> Option<Vec<u8>> + 'a;

fn le_u16(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn le_u32(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(
        b.get(at..at + 4)?.try_into().ok()?,
    )))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Length of a fat binary from its 16-byte header (`None`: not one, or
/// larger than `max`).
pub fn fatbin_len(header: &[u8], max: u64) -> Option<u64> {
    if le_u32(header, 0)? != u64::from(FATBIN_MAGIC) {
        return None;
    }
    let len = le_u16(header, 6)?.checked_add(le_u64(header, 8)?)?;
    (len <= max).then_some(len)
}

/// Length of a 64-bit little-endian ELF image: the furthest byte its
/// headers, sections and segments reach (`None`: malformed or beyond `max`).
pub fn elf_len(read: &mut ImageReader<'_>, max: u64) -> Option<u64> {
    let header = read(0, 64)?;
    if !header.starts_with(&ELF_MAGIC) || header.get(4) != Some(&2) || header.get(5) != Some(&1) {
        return None;
    }
    let table = |off: u64, num: u64, size: u64| off.checked_add(num.checked_mul(size)?);
    let (phoff, phentsize, phnum) = (
        le_u64(&header, 0x20)?,
        le_u16(&header, 0x36)?,
        le_u16(&header, 0x38)?,
    );
    let (shoff, shentsize, shnum) = (
        le_u64(&header, 0x28)?,
        le_u16(&header, 0x3a)?,
        le_u16(&header, 0x3c)?,
    );
    let mut end = 64u64
        .max(table(phoff, phnum, phentsize)?)
        .max(table(shoff, shnum, shentsize)?);
    if end > max {
        return None;
    }
    if shnum > 0 && shentsize >= 0x28 {
        let sections = read(shoff, (shnum * shentsize) as usize)?;
        for s in sections.chunks_exact(shentsize as usize) {
            // SHT_NOBITS (8) occupies no bytes of the file.
            if le_u32(s, 4)? != 8 {
                end = end.max(le_u64(s, 0x18)?.checked_add(le_u64(s, 0x20)?)?);
            }
        }
    }
    if phnum > 0 && phentsize >= 0x28 {
        let segments = read(phoff, (phnum * phentsize) as usize)?;
        for p in segments.chunks_exact(phentsize as usize) {
            end = end.max(le_u64(p, 8)?.checked_add(le_u64(p, 0x20)?)?);
        }
    }
    (end <= max).then_some(end)
}

/// Checks that an image's own headers stay inside it, so the driver never
/// reads past the bytes the guest sent. Wrapped fat binaries (which hold
/// host pointers) are refused: the guest library unwraps them.
pub fn check_image(kind: ImageKind, image: &[u8]) -> bool {
    let len = image.len() as u64;
    match kind {
        ImageKind::Ptx => true,
        ImageKind::Fatbin => fatbin_len(image, len).is_some(),
        ImageKind::Cubin => {
            let mut read = |offset: u64, n: usize| {
                let start = usize::try_from(offset).ok()?;
                image.get(start..start.checked_add(n)?).map(<[u8]>::to_vec)
            };
            elf_len(&mut read, len).is_some()
        }
    }
}

/// Three grid or block dimensions.
impl Field for [u32; 3] {
    fn put(&self, w: &mut Writer) {
        self.iter().for_each(|v| w.u32(*v));
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok([r.u32()?, r.u32()?, r.u32()?])
    }
}

macro_rules! replies {
    ($($(#[$meta:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? })*) => {
        $(
            $(#[$meta])*
            #[derive(Debug, Clone, PartialEq, Eq, Default)]
            pub struct $name {
                $(pub $field: $ty,)*
            }

            impl Wire for $name {
                fn encode(&self, w: &mut Writer) {
                    $(Field::put(&self.$field, w);)*
                }

                fn decode_from(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                    Ok($name { $($field: <$ty as Field>::get(r)?,)* })
                }
            }
        )*
    };
}

replies! {
    /// Reply to `CuInit`.
    CuInitReply { driver_version: u32, device_count: u32 }
    /// Reply to `CuDeviceInfo`: everything the guest caches about a device.
    /// `attributes[i]` is attribute `i` as an `i64`, or
    /// [`ATTRIBUTE_UNSUPPORTED`].
    CuDeviceInfoReply { name: Vec<u8>, uuid: Vec<u8>, total_mem: u64, attributes: Vec<u64> }
    /// Reply to `CuMemGetInfo`.
    CuMemInfoReply { free: u64, total: u64 }
    /// Reply to `CuMemAlloc` and `CuModuleGetGlobal`: a device range.
    CuRangeReply { ptr: u64, size: u64 }
    /// Reply to `CuModuleGetFunction`: the parameter layout
    /// ([`pack_param`] per parameter, in order).
    CuFunctionReply { params: Vec<u64> }
    /// Reply to queries that answer one or two integers (attributes,
    /// occupancy).
    CuIntReply { value: i32, second: i32 }
    /// Reply to `CuEventElapsedTime`: milliseconds as `f32` bits.
    CuElapsedReply { millis_bits: u32 }
    /// Reply to queries that answer one 64-bit value (`cuCtxGetLimit`,
    /// available dynamic shared memory).
    CuValueReply { value: u64 }
    /// Reply to `CuMemcpyDtoHSignalled` and `CuMemcpyHtoDSignalled`:
    /// `landed` 1 when the copy is complete already, 0 when the signal
    /// will say so.
    CuSignalledCopyReply { landed: u32 }
    /// Reply to `CuModuleFunctionNames`: each name followed by a NUL.
    CuNamesReply { names: Vec<u8> }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_follow_cuda_spelling() {
        assert_eq!(error_name(0), Some("CUDA_SUCCESS"));
        assert_eq!(error_name(801), Some("CUDA_ERROR_NOT_SUPPORTED"));
        assert_eq!(error_name(12345), None);
        assert_eq!(error_string(2), Some("out of memory"));
    }

    #[test]
    fn negative_statuses_map_to_cuda_codes() {
        assert_eq!(to_cuda_result(Status(600)), result::ERROR_NOT_READY);
        assert_eq!(
            to_cuda_result(Status::DEVICE_NOT_AVAILABLE),
            result::ERROR_NO_DEVICE
        );
        assert_eq!(
            to_cuda_result(Status::INVALID_VALUE),
            result::ERROR_INVALID_VALUE
        );
    }

    #[test]
    fn image_kinds_are_told_apart() {
        assert_eq!(
            ImageKind::detect(b".version 8.0\n.target sm_90\n"),
            Some(ImageKind::Ptx)
        );
        assert_eq!(
            ImageKind::detect(&[0x7f, b'E', b'L', b'F', 2, 1]),
            Some(ImageKind::Cubin)
        );
        assert_eq!(
            ImageKind::detect(&FATBIN_MAGIC.to_le_bytes()),
            Some(ImageKind::Fatbin)
        );
        assert_eq!(ImageKind::detect(&[0, 0, 0, 0]), None);
    }

    fn elf_with_section(offset: u64, size: u64) -> Vec<u8> {
        let mut elf = vec![0u8; 64 + 64 * 2];
        elf[..4].copy_from_slice(&ELF_MAGIC);
        elf[4] = 2;
        elf[5] = 1;
        elf[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
        let s = 64 + 64;
        elf[s + 4] = 1;
        elf[s + 0x18..s + 0x20].copy_from_slice(&offset.to_le_bytes());
        elf[s + 0x20..s + 0x28].copy_from_slice(&size.to_le_bytes());
        elf
    }

    #[test]
    fn elf_length_covers_sections() {
        let elf = elf_with_section(0x40, 0x80);
        assert!(check_image(ImageKind::Cubin, &elf));
        let mut read = |o: u64, n: usize| elf.get(o as usize..o as usize + n).map(<[u8]>::to_vec);
        assert_eq!(elf_len(&mut read, 1 << 20), Some(192));
    }

    #[test]
    fn images_reaching_past_their_end_are_refused() {
        assert!(!check_image(
            ImageKind::Cubin,
            &elf_with_section(0x40, 0x1000)
        ));
        assert!(!check_image(
            ImageKind::Cubin,
            &elf_with_section(u64::MAX, 2)
        ));
        assert!(!check_image(ImageKind::Cubin, &ELF_MAGIC));
        let mut fatbin = vec![0u8; 32];
        fatbin[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
        fatbin[6] = 16;
        fatbin[8] = 16;
        assert!(check_image(ImageKind::Fatbin, &fatbin));
        fatbin[8] = 17;
        assert!(!check_image(ImageKind::Fatbin, &fatbin));
        let wrapper = FATBIN_WRAPPER_MAGIC.to_le_bytes();
        assert!(!check_image(ImageKind::Fatbin, &wrapper));
    }

    #[test]
    fn no_int_attribute_value_reads_as_unsupported() {
        for value in [-1i32, i32::MIN, i32::MAX, 0] {
            assert_ne!(i64::from(value) as u64, ATTRIBUTE_UNSUPPORTED);
        }
    }

    #[test]
    fn params_pack_and_unpack() {
        assert_eq!(unpack_param(pack_param(24, 8)), (24, 8));
    }

    #[test]
    fn replies_round_trip() {
        let reply = CuDeviceInfoReply {
            name: b"GPU".to_vec(),
            uuid: vec![7; 16],
            total_mem: 80 << 30,
            attributes: vec![1, ATTRIBUTE_UNSUPPORTED],
        };
        assert_eq!(
            CuDeviceInfoReply::from_bytes(&reply.to_bytes()).unwrap(),
            reply
        );
        let value = CuValueReply {
            value: u64::MAX - 1,
        };
        assert_eq!(CuValueReply::from_bytes(&value.to_bytes()).unwrap(), value);
        let names = CuNamesReply {
            names: b"first\0second\0".to_vec(),
        };
        assert_eq!(CuNamesReply::from_bytes(&names.to_bytes()).unwrap(), names);
        let dims: [u32; 3] = [1, 2, 3];
        let mut w = Writer::new();
        dims.put(&mut w);
        assert_eq!(<[u32; 3]>::get(&mut Reader::new(&w.bytes)).unwrap(), dims);
    }

    #[test]
    fn library_messages_round_trip() {
        use crate::messages::{
            CuCtxGetLimit, CuCtxGetStreamPriorityRange, CuImageChunk, CuModuleFunctionNames,
            CuModuleLoadStaged, CuOccupancyAvailableDynamicSMem, CuOccupancyMaxActiveClusters,
            Request,
        };
        let requests: Vec<Request> = vec![
            CuImageChunk {
                upload: 9,
                offset: IMAGE_CHUNK as u64,
                data: vec![0xab; 4096],
            }
            .into(),
            CuModuleLoadStaged {
                module: 10,
                ctx: 1,
                upload: 9,
                len: IMAGE_CHUNK as u64 + 4096,
            }
            .into(),
            CuCtxGetStreamPriorityRange { ctx: 1 }.into(),
            CuCtxGetLimit { ctx: 1, limit: 5 }.into(),
            CuOccupancyAvailableDynamicSMem {
                function: 3,
                blocks: 2,
                block_size: 128,
            }
            .into(),
            CuOccupancyMaxActiveClusters {
                function: 3,
                grid: [8, 1, 1],
                block: [128, 1, 1],
                shared_mem: 0,
                cluster: [2, 1, 1],
            }
            .into(),
            CuModuleFunctionNames { module: 10 }.into(),
        ];
        for request in requests {
            let mut w = Writer::new();
            request.encode_payload(&mut w);
            assert!(OPCODES.contains(&request.opcode()));
            assert_eq!(
                Request::decode(request.opcode(), &w.bytes).unwrap(),
                request
            );
            // A truncated payload is an error, never a panic.
            assert!(Request::decode(request.opcode(), &w.bytes[..w.bytes.len() - 1]).is_err());
        }
    }

    #[test]
    fn one_chunk_fits_in_a_request() {
        assert!(IMAGE_CHUNK as u64 + 64 <= u64::from(crate::limits::MAX_REQUEST_LEN));
        assert!(IMAGE_CHUNK as u64 <= MAX_IMAGE_LEN && MAX_IMAGE_LEN <= MAX_STAGED_BYTES);
    }
}
