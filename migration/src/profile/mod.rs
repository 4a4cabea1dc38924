//! The device profile the guest saw: the device-info values an application
//! may have based its work on. A destination device must honour it (see
//! `check`); a pool of devices can expose their common subset instead
//! (`Profile::common_subset`), like a named CPU model in QEMU.

mod check;
mod memory;
mod subset;

pub use check::{check, Incompatible, Shortfall};
pub use memory::{default_memory_size, MemorySizeError, MEMORY_GRANULE};
pub use subset::SubsetError;

use crate::codec::{self, record, Codec, Decoder, Encoder};

record! {
    /// An OpenCL C version (`CL_DEVICE_OPENCL_C_VERSION`).
    #[derive(Copy, Default, PartialOrd, Ord)]
    pub struct Version {
        pub major: u32,
        pub minor: u32,
    }
}

impl Version {
    pub const fn new(major: u32, minor: u32) -> Self {
        Version { major, minor }
    }

    /// Parses `OpenCL C <major>.<minor> <vendor text>`, as devices report it.
    pub fn parse_opencl_c(text: &str) -> Option<Version> {
        let rest = text.trim().strip_prefix("OpenCL C ")?;
        let number = rest.split_whitespace().next()?;
        let (major, minor) = number.split_once('.')?;
        Some(Version::new(major.parse().ok()?, minor.parse().ok()?))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

record! {
    /// Vector widths per scalar type (`CL_DEVICE_PREFERRED_VECTOR_WIDTH_*`
    /// or `CL_DEVICE_NATIVE_VECTOR_WIDTH_*`).
    #[derive(Copy, Default)]
    pub struct VectorWidths {
        pub char: u32,
        pub short: u32,
        pub int: u32,
        pub long: u32,
        pub float: u32,
        pub double: u32,
        pub half: u32,
    }
}

impl VectorWidths {
    /// The smaller width of each type.
    pub fn min(&self, other: &VectorWidths) -> VectorWidths {
        VectorWidths {
            char: self.char.min(other.char),
            short: self.short.min(other.short),
            int: self.int.min(other.int),
            long: self.long.min(other.long),
            float: self.float.min(other.float),
            double: self.double.min(other.double),
            half: self.half.min(other.half),
        }
    }
}

/// The device-info values that decide whether a guest's work can move
/// to another device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Profile {
    /// `CL_DEVICE_TYPE` bits. Informational: a vGPU may move between
    /// a CPU and a GPU; the type is never a reason to refuse.
    pub device_type: u64,
    pub max_work_group_size: u64,
    pub max_work_item_dimensions: u32,
    /// One entry per dimension.
    pub max_work_item_sizes: Vec<u64>,
    pub local_mem_size: u64,
    pub global_mem_size: u64,
    pub max_mem_alloc_size: u64,
    pub max_constant_buffer_size: u64,
    /// Largest total size of a kernel's arguments.
    pub max_parameter_size: u64,
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN`, in bits: sub-buffer origins the
    /// guest chose are aligned to it.
    pub mem_base_addr_align: u32,
    /// `CL_DEVICE_EXTENSIONS`, one name per entry.
    pub extensions: Vec<String>,
    pub image_support: bool,
    /// Pointer size of kernels: changes the layout of structs the guest
    /// passes by value, so it must match exactly.
    pub address_bits: u32,
    pub little_endian: bool,
    pub opencl_c_version: Version,
    /// Double precision (`CL_DEVICE_DOUBLE_FP_CONFIG` non-zero).
    pub fp64: bool,
    /// Half precision (`cl_khr_fp16`).
    pub fp16: bool,
    /// Hints: recorded and narrowed by the common subset, never a reason
    /// to refuse (kernels run correctly at any width).
    pub preferred_vector_widths: VectorWidths,
    pub native_vector_widths: VectorWidths,
    /// The partition schemes offered (`CL_DEVICE_PARTITION_PROPERTIES`
    /// without its 0; empty: the device cannot be partitioned).
    pub partition_properties: Vec<u64>,
}

/// Marks the encoding that adds partition schemes. It comes where the
/// first encoding starts with the device type, whose bits
/// (`CL_DEVICE_TYPE_*`, or `CL_DEVICE_TYPE_ALL`) never reach this value, so
/// profiles without partitions keep the first encoding, which builds that
/// predate partitions read.
const WITH_PARTITIONS: u64 = 0x7670_7266_0000_0002;

impl Codec for Profile {
    fn encode(&self, e: &mut Encoder) {
        if !self.partition_properties.is_empty() {
            e.u64(WITH_PARTITIONS);
        }
        self.device_type.encode(e);
        self.max_work_group_size.encode(e);
        self.max_work_item_dimensions.encode(e);
        self.max_work_item_sizes.encode(e);
        self.local_mem_size.encode(e);
        self.global_mem_size.encode(e);
        self.max_mem_alloc_size.encode(e);
        self.max_constant_buffer_size.encode(e);
        self.max_parameter_size.encode(e);
        self.mem_base_addr_align.encode(e);
        self.extensions.encode(e);
        self.image_support.encode(e);
        self.address_bits.encode(e);
        self.little_endian.encode(e);
        self.opencl_c_version.encode(e);
        self.fp64.encode(e);
        self.fp16.encode(e);
        self.preferred_vector_widths.encode(e);
        self.native_vector_widths.encode(e);
        if !self.partition_properties.is_empty() {
            self.partition_properties.encode(e);
        }
    }

    fn decode(d: &mut Decoder<'_>) -> codec::Result<Self> {
        let first = d.u64()?;
        let with_partitions = first == WITH_PARTITIONS;
        let device_type = if with_partitions { d.u64()? } else { first };
        let mut profile = Profile {
            device_type,
            max_work_group_size: Codec::decode(d)?,
            max_work_item_dimensions: Codec::decode(d)?,
            max_work_item_sizes: Codec::decode(d)?,
            local_mem_size: Codec::decode(d)?,
            global_mem_size: Codec::decode(d)?,
            max_mem_alloc_size: Codec::decode(d)?,
            max_constant_buffer_size: Codec::decode(d)?,
            max_parameter_size: Codec::decode(d)?,
            mem_base_addr_align: Codec::decode(d)?,
            extensions: Codec::decode(d)?,
            image_support: Codec::decode(d)?,
            address_bits: Codec::decode(d)?,
            little_endian: Codec::decode(d)?,
            opencl_c_version: Codec::decode(d)?,
            fp64: Codec::decode(d)?,
            fp16: Codec::decode(d)?,
            preferred_vector_widths: Codec::decode(d)?,
            native_vector_widths: Codec::decode(d)?,
            partition_properties: Vec::new(),
        };
        if with_partitions {
            profile.partition_properties = Codec::decode(d)?;
        }
        Ok(profile)
    }
}

impl Profile {
    /// Splits a `CL_DEVICE_EXTENSIONS` string into names.
    pub fn parse_extensions(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    /// Whether the profile names `extension`.
    pub fn has_extension(&self, extension: &str) -> bool {
        self.extensions.iter().any(|e| e == extension)
    }

    /// The profile every device of `pool` can honour; see `subset.rs`.
    pub fn common_subset(pool: &[Profile]) -> Result<Profile, SubsetError> {
        subset::common_subset(pool)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        codec::to_bytes(self)
    }

    /// Decodes a profile written by `to_bytes` (a portable-profile file).
    pub fn from_bytes(bytes: &[u8]) -> codec::Result<Profile> {
        codec::from_bytes(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_opencl_c_versions_as_devices_report_them() {
        assert_eq!(
            Version::parse_opencl_c("OpenCL C 1.2 pocl"),
            Some(Version::new(1, 2))
        );
        assert_eq!(
            Version::parse_opencl_c("OpenCL C 3.0 "),
            Some(Version::new(3, 0))
        );
        assert_eq!(Version::parse_opencl_c("OpenCL 3.0 CUDA"), None);
        assert!(Version::new(1, 10) > Version::new(1, 2));
    }

    #[test]
    fn profile_round_trips() {
        let profile = Profile {
            max_work_item_sizes: vec![1024, 1024, 64],
            extensions: Profile::parse_extensions("cl_khr_fp64  cl_khr_icd"),
            opencl_c_version: Version::new(3, 0),
            ..Profile::default()
        };
        assert_eq!(Profile::from_bytes(&profile.to_bytes()), Ok(profile));
    }

    #[test]
    fn partition_schemes_round_trip_and_leave_other_profiles_as_they_were() {
        let plain = Profile {
            device_type: 2,
            extensions: Profile::parse_extensions("cl_khr_fp64"),
            ..Profile::default()
        };
        let mut partitioned = plain.clone();
        partitioned.partition_properties = vec![0x1086, 0x1087];
        let bytes = partitioned.to_bytes();
        assert_eq!(Profile::from_bytes(&bytes), Ok(partitioned));
        // Without partitions, the first encoding: the device type first.
        assert_eq!(plain.to_bytes()[..8], 2u64.to_le_bytes());
        assert_eq!(bytes[..8], WITH_PARTITIONS.to_le_bytes());
        assert_eq!(Profile::from_bytes(&plain.to_bytes()), Ok(plain));
    }
}
