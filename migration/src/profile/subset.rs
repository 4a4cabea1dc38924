//! The portable profile of a pool of devices: what every one of them can
//! honour, so a guest that saw it can move to any device of the pool.

use super::Profile;

/// Why a pool of devices has no common profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubsetError {
    #[error("no device profiles to combine")]
    Empty,
    #[error("devices differ in address bits ({0} and {1}): no profile fits both")]
    AddressBits(u32, u32),
    #[error("devices differ in byte order: no profile fits both")]
    Endianness,
}

/// Minimum of every limit, intersection of the extensions, conjunction of
/// the features, the strictest base-address alignment. The device type is
/// the first profile's.
pub(super) fn common_subset(pool: &[Profile]) -> Result<Profile, SubsetError> {
    let (first, rest) = pool.split_first().ok_or(SubsetError::Empty)?;
    let mut out = first.clone();
    for p in rest {
        if p.address_bits != out.address_bits {
            return Err(SubsetError::AddressBits(out.address_bits, p.address_bits));
        }
        if p.little_endian != out.little_endian {
            return Err(SubsetError::Endianness);
        }
        out.max_work_group_size = out.max_work_group_size.min(p.max_work_group_size);
        out.max_work_item_dimensions = out.max_work_item_dimensions.min(p.max_work_item_dimensions);
        out.max_work_item_sizes
            .truncate(p.max_work_item_sizes.len());
        for (mine, theirs) in out
            .max_work_item_sizes
            .iter_mut()
            .zip(&p.max_work_item_sizes)
        {
            *mine = (*mine).min(*theirs);
        }
        out.local_mem_size = out.local_mem_size.min(p.local_mem_size);
        out.global_mem_size = out.global_mem_size.min(p.global_mem_size);
        out.max_mem_alloc_size = out.max_mem_alloc_size.min(p.max_mem_alloc_size);
        out.max_constant_buffer_size = out.max_constant_buffer_size.min(p.max_constant_buffer_size);
        out.max_parameter_size = out.max_parameter_size.min(p.max_parameter_size);
        out.mem_base_addr_align = out.mem_base_addr_align.max(p.mem_base_addr_align);
        out.extensions.retain(|e| p.has_extension(e));
        out.image_support &= p.image_support;
        out.partition_properties
            .retain(|s| p.partition_properties.contains(s));
        out.opencl_c_version = out.opencl_c_version.min(p.opencl_c_version);
        out.fp64 &= p.fp64;
        out.fp16 &= p.fp16;
        out.preferred_vector_widths = out.preferred_vector_widths.min(&p.preferred_vector_widths);
        out.native_vector_widths = out.native_vector_widths.min(&p.native_vector_widths);
    }
    let dims = out
        .max_work_item_sizes
        .len()
        .min(out.max_work_item_dimensions as usize);
    out.max_work_item_sizes.truncate(dims);
    if !out.fp64 {
        out.preferred_vector_widths.double = 0;
        out.native_vector_widths.double = 0;
    }
    if !out.fp16 {
        out.preferred_vector_widths.half = 0;
        out.native_vector_widths.half = 0;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::check::tests::{cpu, gpu};
    use super::super::{check, Version};
    use super::*;

    #[test]
    fn portable_profile_fits_every_device_of_the_pool() {
        let pool = [gpu(), cpu()];
        let portable = Profile::common_subset(&pool).unwrap();
        for device in &pool {
            assert_eq!(check(&portable, device), Ok(()));
        }
        assert_eq!(portable.max_work_group_size, 1024);
        assert_eq!(portable.max_work_item_sizes, vec![1024, 1024, 64]);
        assert_eq!(portable.local_mem_size, 48 << 10);
        assert_eq!(portable.max_parameter_size, 1024);
        assert_eq!(portable.mem_base_addr_align, 4096);
        assert!(!portable.image_support);
        assert!(portable.partition_properties.is_empty(), "the GPU has none");
        assert!(!portable.fp16);
        assert_eq!(portable.preferred_vector_widths.half, 0);
        assert_eq!(portable.opencl_c_version, Version::new(1, 2));
        assert_eq!(
            portable.extensions,
            vec!["cl_khr_fp64", "cl_khr_int64_base_atomics", "cl_khr_icd"]
        );
    }

    #[test]
    fn a_pool_of_one_is_that_device() {
        assert_eq!(Profile::common_subset(&[gpu()]), Ok(gpu()));
    }

    #[test]
    fn pools_without_a_common_profile_are_refused() {
        assert_eq!(Profile::common_subset(&[]), Err(SubsetError::Empty));
        let mut narrow = cpu();
        narrow.address_bits = 32;
        assert_eq!(
            Profile::common_subset(&[gpu(), narrow]),
            Err(SubsetError::AddressBits(64, 32))
        );
        let mut big = cpu();
        big.little_endian = false;
        assert_eq!(
            Profile::common_subset(&[gpu(), big]),
            Err(SubsetError::Endianness)
        );
    }
}
