//! Info values as the bytes `clGet*Info` copies out, and the forwarding of
//! queries the backend answers.

use std::ffi::c_void;

use opencl_sys::{cl_name_version, CL_NAME_VERSION_MAX_NAME_SIZE};
use vgpu_protocol::messages::GetInfo;
use vgpu_protocol::InfoTarget;

use crate::core::object::ClResult;
use crate::core::platform;

pub fn u32(v: u32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

pub fn i32(v: i32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

pub fn u64(v: u64) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

pub fn usize(v: usize) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

pub fn ptr(p: *mut c_void) -> Vec<u8> {
    usize(p as usize)
}

pub fn u64s(vs: &[u64]) -> Vec<u8> {
    vs.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// A NUL-terminated string.
pub fn string(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 1);
    v.extend_from_slice(s.as_bytes());
    v.push(0);
    v
}

/// A `cl_name_version`: version then a NUL-padded 64-byte name.
pub fn name_version(version: u32, name: &str) -> Vec<u8> {
    let mut v = u32(version);
    let mut bytes = [0u8; CL_NAME_VERSION_MAX_NAME_SIZE];
    let n = name.len().min(CL_NAME_VERSION_MAX_NAME_SIZE - 1);
    bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
    v.extend_from_slice(&bytes);
    v
}

/// Drops the entries of a `cl_name_version[]` value whose name `hide`s.
pub fn filter_name_versions(bytes: &[u8], hide: impl Fn(&str) -> bool) -> Vec<u8> {
    bytes
        .chunks_exact(std::mem::size_of::<cl_name_version>())
        .filter(|entry| !hide(&c_string(&entry[4..])))
        .flatten()
        .copied()
        .collect()
}

/// The text of a NUL-terminated value (up to the first NUL).
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// A little-endian unsigned value of 1 to 8 bytes (`cl_bool`, `cl_uint`,
/// `size_t`, `cl_ulong`, bitfields).
pub fn le_number(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(buf)
}

/// A `GetInfo` answered by the backend: the raw value bytes.
pub fn remote(target: InfoTarget, handle: u64, index: u32, param: u32) -> ClResult<Vec<u8>> {
    remote_with_room(
        target,
        handle,
        index,
        param,
        vgpu_transport::client::DEFAULT_REPLY_ROOM,
    )
}

/// As `remote`, reserving `room` bytes for a large value.
pub fn remote_with_room(
    target: InfoTarget,
    handle: u64,
    index: u32,
    param: u32,
    room: usize,
) -> ClResult<Vec<u8>> {
    let client = platform::client()?;
    let request = GetInfo {
        target: target as u32,
        handle,
        index,
        param,
    };
    client
        .call_with_reply_room(request.into(), room)
        .map_err(|status| status.0)
}
