//! `cuModuleLoadData` gets only an address: the image's length comes from
//! its own headers (ELF tables, the fat binary header, or the NUL that ends
//! PTX), as the real driver finds it.

use std::ffi::{c_char, c_void, CStr};

use vgpu_protocol::cuda::MAX_IMAGE_LEN;
use vgpu_protocol::cuda::{elf_len, fatbin_len, ELF_MAGIC, FATBIN_MAGIC, FATBIN_WRAPPER_MAGIC};

use crate::ffi::{result, CuResult};

/// Images larger than one message travel in chunks (`api::module::send_image`).
const MAX: u64 = MAX_IMAGE_LEN;

fn read(base: *const u8, offset: u64, len: usize) -> Option<Vec<u8>> {
    if offset.checked_add(len as u64)? > MAX {
        return None;
    }
    // SAFETY: the application passed an image that extends this far: its
    // own headers say so, and the total stays under the protocol's limit.
    Some(unsafe { std::slice::from_raw_parts(base.add(offset as usize), len) }.to_vec())
}

/// The bytes of the module image at `image`.
pub(crate) fn image_bytes(image: *const c_void) -> CuResult<Vec<u8>> {
    if image.is_null() {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let base = image.cast::<u8>();
    let head = read(base, 0, 4).ok_or(result::ERROR_INVALID_IMAGE)?;
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if head == ELF_MAGIC {
        let mut reader = |offset: u64, len: usize| read(base, offset, len);
        let len = elf_len(&mut reader, MAX).ok_or(result::ERROR_INVALID_IMAGE)?;
        return read(base, 0, len as usize).ok_or(result::ERROR_INVALID_IMAGE);
    }
    if magic == FATBIN_WRAPPER_MAGIC {
        // { int magic; int version; const void *data; void *filename_or_fatbins; }
        let data = read(base, 8, 8).ok_or(result::ERROR_INVALID_IMAGE)?;
        let data = u64::from_le_bytes(data.try_into().map_err(|_| result::ERROR_INVALID_IMAGE)?);
        return image_bytes(data as usize as *const c_void);
    }
    if magic == FATBIN_MAGIC {
        let header = read(base, 0, 16).ok_or(result::ERROR_INVALID_IMAGE)?;
        let len = fatbin_len(&header, MAX).ok_or(result::ERROR_INVALID_IMAGE)?;
        return read(base, 0, len as usize).ok_or(result::ERROR_INVALID_IMAGE);
    }
    // PTX: a NUL-terminated string.
    // SAFETY: anything else must be PTX text, which ends with a NUL.
    let text = unsafe { CStr::from_ptr(image.cast::<c_char>()) }.to_bytes();
    if text.len() as u64 > MAX {
        return Err(result::ERROR_INVALID_IMAGE);
    }
    Ok(text.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_ends_at_its_nul() {
        let ptx = b".version 8.0\n.target sm_90\0garbage";
        let bytes = image_bytes(ptx.as_ptr().cast()).unwrap();
        assert_eq!(bytes, b".version 8.0\n.target sm_90");
    }

    #[test]
    fn fat_binary_length_comes_from_its_header() {
        let mut fatbin = [0u8; 64];
        fatbin[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
        fatbin[6] = 16;
        fatbin[8] = 24;
        assert_eq!(image_bytes(fatbin.as_ptr().cast()).unwrap().len(), 40);
        let mut wrapper = [0u8; 24];
        wrapper[..4].copy_from_slice(&FATBIN_WRAPPER_MAGIC.to_le_bytes());
        wrapper[8..16].copy_from_slice(&(fatbin.as_ptr() as u64).to_le_bytes());
        assert_eq!(image_bytes(wrapper.as_ptr().cast()).unwrap().len(), 40);
    }

    #[test]
    fn null_image_is_invalid() {
        assert_eq!(
            image_bytes(std::ptr::null()),
            Err(result::ERROR_INVALID_VALUE)
        );
    }
}
