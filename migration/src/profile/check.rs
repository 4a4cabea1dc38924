//! Whether a destination device honours the profile the guest saw.

use super::{Profile, Version};

/// One way a destination falls short of what the guest saw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Shortfall {
    #[error("destination {what} {offered} < {saw} the guest saw")]
    Limit {
        what: &'static str,
        offered: u64,
        saw: u64,
    },
    #[error("destination max work-item size in dimension {dim} {offered} < {saw} the guest saw")]
    WorkItemSize { dim: usize, offered: u64, saw: u64 },
    #[error("destination lacks extension {0}, which the guest saw")]
    Extension(String),
    #[error("destination lacks {0}, which the guest saw")]
    Feature(&'static str),
    #[error("destination cannot partition {0}, which the guest saw it could")]
    Partition(&'static str),
    #[error("destination OpenCL C {offered} < {saw} the guest saw")]
    OpenClC { offered: Version, saw: Version },
    #[error("destination address bits {offered} differ from the {saw} the guest saw")]
    AddressBits { offered: u32, saw: u32 },
    #[error("destination is {offered}-endian, the guest saw {saw}-endian")]
    Endianness {
        offered: &'static str,
        saw: &'static str,
    },
    #[error(
        "destination base address alignment {offered} bits is coarser than the {saw} bits the guest saw"
    )]
    Alignment { offered: u32, saw: u32 },
}

/// Every shortfall of a destination, listed in one error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Incompatible {
    pub shortfalls: Vec<Shortfall>,
}

impl std::fmt::Display for Incompatible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "destination device cannot honour the profile the guest saw: "
        )?;
        for (i, shortfall) in self.shortfalls.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{shortfall}")?;
        }
        Ok(())
    }
}

fn endian(little: bool) -> &'static str {
    if little {
        "little"
    } else {
        "big"
    }
}

const PARTITION_EQUALLY: u64 = 0x1086;
const PARTITION_BY_COUNTS: u64 = 0x1087;
const PARTITION_BY_AFFINITY_DOMAIN: u64 = 0x1088;

fn partition_name(scheme: u64) -> &'static str {
    match scheme {
        PARTITION_EQUALLY => "equally",
        PARTITION_BY_COUNTS => "by counts",
        PARTITION_BY_AFFINITY_DOMAIN => "by affinity domain",
        _ => "by an unknown scheme",
    }
}

/// Checks that a device offering `offered` can run everything a guest that
/// saw `saw` may do: every limit at least as large, every extension and
/// feature present, the same pointer size and byte order. Lists every
/// shortfall, not just the first. The device type and the vector-width
/// hints are never a reason to refuse.
pub fn check(saw: &Profile, offered: &Profile) -> Result<(), Incompatible> {
    let mut out = Vec::new();
    let limits = [
        (
            "max work-group size",
            offered.max_work_group_size,
            saw.max_work_group_size,
        ),
        (
            "max work-item dimensions",
            u64::from(offered.max_work_item_dimensions),
            u64::from(saw.max_work_item_dimensions),
        ),
        (
            "local memory size",
            offered.local_mem_size,
            saw.local_mem_size,
        ),
        (
            "global memory size",
            offered.global_mem_size,
            saw.global_mem_size,
        ),
        (
            "max mem alloc size",
            offered.max_mem_alloc_size,
            saw.max_mem_alloc_size,
        ),
        (
            "max constant buffer size",
            offered.max_constant_buffer_size,
            saw.max_constant_buffer_size,
        ),
        (
            "max parameter size",
            offered.max_parameter_size,
            saw.max_parameter_size,
        ),
    ];
    for (what, offered, saw) in limits {
        if offered < saw {
            out.push(Shortfall::Limit { what, offered, saw });
        }
    }
    for (dim, &saw_size) in saw.max_work_item_sizes.iter().enumerate() {
        let offered_size = offered.max_work_item_sizes.get(dim).copied().unwrap_or(0);
        if offered_size < saw_size {
            out.push(Shortfall::WorkItemSize {
                dim,
                offered: offered_size,
                saw: saw_size,
            });
        }
    }
    for extension in &saw.extensions {
        if !offered.has_extension(extension) {
            out.push(Shortfall::Extension(extension.clone()));
        }
    }
    let features = [
        ("image support", offered.image_support, saw.image_support),
        ("double precision (fp64)", offered.fp64, saw.fp64),
        ("half precision (fp16)", offered.fp16, saw.fp16),
    ];
    for (what, offered, saw) in features {
        if saw && !offered {
            out.push(Shortfall::Feature(what));
        }
    }
    for scheme in &saw.partition_properties {
        if !offered.partition_properties.contains(scheme) {
            out.push(Shortfall::Partition(partition_name(*scheme)));
        }
    }
    if offered.opencl_c_version < saw.opencl_c_version {
        out.push(Shortfall::OpenClC {
            offered: offered.opencl_c_version,
            saw: saw.opencl_c_version,
        });
    }
    if offered.address_bits != saw.address_bits {
        out.push(Shortfall::AddressBits {
            offered: offered.address_bits,
            saw: saw.address_bits,
        });
    }
    if offered.little_endian != saw.little_endian {
        out.push(Shortfall::Endianness {
            offered: endian(offered.little_endian),
            saw: endian(saw.little_endian),
        });
    }
    if offered.mem_base_addr_align > saw.mem_base_addr_align {
        out.push(Shortfall::Alignment {
            offered: offered.mem_base_addr_align,
            saw: saw.mem_base_addr_align,
        });
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(Incompatible { shortfalls: out })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::VectorWidths;
    use super::*;

    /// A GPU-like profile.
    pub fn gpu() -> Profile {
        Profile {
            device_type: 4,
            max_work_group_size: 1024,
            max_work_item_dimensions: 3,
            max_work_item_sizes: vec![1024, 1024, 64],
            local_mem_size: 48 << 10,
            global_mem_size: 80 << 30,
            max_mem_alloc_size: 20 << 30,
            max_constant_buffer_size: 64 << 10,
            max_parameter_size: 4352,
            mem_base_addr_align: 4096,
            extensions: Profile::parse_extensions(
                "cl_khr_fp64 cl_khr_int64_base_atomics cl_khr_icd",
            ),
            image_support: true,
            address_bits: 64,
            little_endian: true,
            opencl_c_version: Version::new(3, 0),
            fp64: true,
            fp16: false,
            preferred_vector_widths: VectorWidths {
                char: 1,
                short: 1,
                int: 1,
                long: 1,
                float: 1,
                double: 1,
                half: 0,
            },
            native_vector_widths: VectorWidths::default(),
            partition_properties: vec![],
        }
    }

    /// A CPU-like profile (PoCL).
    pub fn cpu() -> Profile {
        Profile {
            device_type: 2,
            max_work_group_size: 4096,
            max_work_item_dimensions: 3,
            max_work_item_sizes: vec![4096, 4096, 4096],
            local_mem_size: 4 << 20,
            global_mem_size: 20 << 30,
            max_mem_alloc_size: 8 << 30,
            max_constant_buffer_size: 4 << 20,
            max_parameter_size: 1024,
            mem_base_addr_align: 1024,
            extensions: Profile::parse_extensions(
                "cl_khr_fp64 cl_khr_fp16 cl_khr_int64_base_atomics cl_khr_icd cl_khr_spir",
            ),
            image_support: false,
            address_bits: 64,
            little_endian: true,
            opencl_c_version: Version::new(1, 2),
            fp64: true,
            fp16: true,
            preferred_vector_widths: VectorWidths {
                char: 16,
                short: 8,
                int: 4,
                long: 2,
                float: 4,
                double: 2,
                half: 8,
            },
            native_vector_widths: VectorWidths::default(),
            partition_properties: vec![PARTITION_EQUALLY, PARTITION_BY_COUNTS],
        }
    }

    #[test]
    fn same_or_larger_device_is_compatible() {
        assert_eq!(check(&gpu(), &gpu()), Ok(()));
        let mut bigger = gpu();
        bigger.max_work_group_size = 2048;
        bigger.extensions.push("cl_khr_fp16".into());
        bigger.device_type = 2;
        bigger.preferred_vector_widths = VectorWidths::default();
        assert_eq!(check(&gpu(), &bigger), Ok(()));
    }

    #[test]
    fn every_shortfall_is_listed_with_a_clear_message() {
        let saw = gpu();
        let mut offered = gpu();
        offered.max_work_group_size = 256;
        offered.max_work_item_sizes = vec![256, 256];
        offered.max_work_item_dimensions = 2;
        offered.local_mem_size = 16 << 10;
        offered.global_mem_size = 1 << 30;
        offered.max_mem_alloc_size = 1 << 29;
        offered.max_constant_buffer_size = 1 << 10;
        offered.max_parameter_size = 256;
        offered.extensions.retain(|e| e != "cl_khr_fp64");
        offered.image_support = false;
        offered.fp64 = false;
        offered.opencl_c_version = Version::new(1, 2);
        offered.address_bits = 32;
        offered.little_endian = false;
        offered.mem_base_addr_align = 8192;
        let err = check(&saw, &offered).unwrap_err();
        let text = err.to_string();
        for expected in [
            "destination max work-group size 256 < 1024 the guest saw",
            "destination max work-item dimensions 2 < 3 the guest saw",
            "destination max work-item size in dimension 0 256 < 1024 the guest saw",
            "destination max work-item size in dimension 2 0 < 64 the guest saw",
            "destination local memory size 16384 < 49152 the guest saw",
            "destination global memory size",
            "destination max mem alloc size",
            "destination max constant buffer size 1024 < 65536 the guest saw",
            "destination max parameter size 256 < 4352 the guest saw",
            "destination lacks extension cl_khr_fp64, which the guest saw",
            "destination lacks image support, which the guest saw",
            "destination lacks double precision (fp64), which the guest saw",
            "destination OpenCL C 1.2 < 3.0 the guest saw",
            "destination address bits 32 differ from the 64 the guest saw",
            "destination is big-endian, the guest saw little-endian",
            "destination base address alignment 8192 bits is coarser than the 4096 bits",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in {text}");
        }
        assert_eq!(err.shortfalls.len(), 17);
    }

    #[test]
    fn cpu_and_gpu_fall_short_of_each_other() {
        let gpu_on_cpu = check(&gpu(), &cpu()).unwrap_err();
        assert!(gpu_on_cpu
            .shortfalls
            .contains(&Shortfall::Feature("image support")));
        let cpu_on_gpu = check(&cpu(), &gpu()).unwrap_err();
        assert!(cpu_on_gpu
            .shortfalls
            .contains(&Shortfall::Extension("cl_khr_fp16".into())));
        assert!(cpu_on_gpu
            .shortfalls
            .contains(&Shortfall::Partition("equally")));
        assert!(cpu_on_gpu
            .to_string()
            .contains("destination cannot partition by counts, which the guest saw it could"));
    }
}
