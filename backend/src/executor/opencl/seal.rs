//! Program binaries a guest gets (`CL_PROGRAM_BINARIES`) are sealed: the
//! driver's bytes behind a magic and an HMAC-SHA256 tag under a host key,
//! over the device's identity and the bytes (a binary sealed for one device
//! is refused on another before its driver parses it).
//! A driver parses a binary with the trust it gives its own compiler's
//! output (PoCL aborts on a malformed one and writes files named inside
//! it), so a binary given back (`clCreateProgramWithBinary`, a restore
//! stream) reaches the driver only when its tag is right: the backend, or
//! another backend sharing the key, made it. Every backend of a host (or a
//! pool that shares the key file) accepts the others' binaries, so a
//! program's on-disk binary cache (pyopencl's) survives a restart, and a
//! checkpoint of a program created from a binary restores in a new
//! process. Nothing is remembered per binary, so nothing grows.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use vgpu_protocol::Status;

const MAGIC: &[u8; 8] = b"VGPUBIN1";
const TAG_LEN: usize = 32;
/// Bytes a sealed binary has beyond the driver's.
pub const SEAL_OVERHEAD: usize = MAGIC.len() + TAG_LEN;
/// Length of a key file.
pub const KEY_LEN: usize = 32;

/// The secret that tags binaries.
pub struct BinaryKey([u8; KEY_LEN]);

impl std::fmt::Debug for BinaryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BinaryKey(..)")
    }
}

/// Why a key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read or create the binary key {0}")]
    Io(std::path::PathBuf, #[source] std::io::Error),
    #[error("{0} is not a binary key: {1} bytes, expected {KEY_LEN}")]
    Length(std::path::PathBuf, usize),
    #[error("the binary key {0} may be read by other users (mode {1:o}): make it 0600")]
    Exposed(std::path::PathBuf, u32),
}

impl BinaryKey {
    /// A key of fresh random bytes.
    pub fn random() -> BinaryKey {
        let mut key = [0u8; KEY_LEN];
        let mut filled = 0;
        while filled < KEY_LEN {
            // SAFETY: the pointer and length describe the unfilled tail of
            // `key`, which getrandom writes at most that many bytes into.
            let n =
                unsafe { libc::getrandom(key[filled..].as_mut_ptr().cast(), KEY_LEN - filled, 0) };
            if n > 0 {
                filled += n as usize;
            } else {
                let err = std::io::Error::last_os_error();
                assert!(
                    err.kind() == std::io::ErrorKind::Interrupted,
                    "the kernel's random source failed: {err}"
                );
            }
        }
        BinaryKey(key)
    }

    /// Reads the key at `path`, creating it (mode 0600, its folder 0700)
    /// when absent; two backends starting at once agree on one key.
    pub fn load_or_create(path: &Path) -> Result<BinaryKey, KeyError> {
        let io = |e| KeyError::Io(path.to_path_buf(), e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io)?;
        }
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
        match created {
            Ok(mut file) => {
                // Written whole before anyone reads it: a reader racing us
                // sees a short file and fails clearly instead of keying
                // with part of a key.
                let key = BinaryKey::random();
                file.write_all(&key.0).map_err(io)?;
                file.sync_all().map_err(io)?;
                Ok(key)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let mut file = std::fs::File::open(path).map_err(io)?;
                let mode = file.metadata().map_err(io)?.permissions().mode();
                if mode & 0o077 != 0 {
                    return Err(KeyError::Exposed(path.to_path_buf(), mode & 0o777));
                }
                let mut bytes = Vec::with_capacity(KEY_LEN + 1);
                Read::by_ref(&mut file)
                    .take(KEY_LEN as u64 + 1)
                    .read_to_end(&mut bytes)
                    .map_err(io)?;
                let key: [u8; KEY_LEN] = bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| KeyError::Length(path.to_path_buf(), bytes.len()))?;
                Ok(BinaryKey(key))
            }
            Err(e) => Err(io(e)),
        }
    }

    fn mac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes keys of any length")
    }
}

static KEY: OnceLock<BinaryKey> = OnceLock::new();

/// Sets the key binaries are sealed with, once, before any is handed out;
/// false if one was set already. Without it a process keys with random
/// bytes of its own (its binaries then come back only to itself).
pub fn install_key(key: BinaryKey) -> bool {
    KEY.set(key).is_ok()
}

fn key() -> &'static BinaryKey {
    KEY.get_or_init(BinaryKey::random)
}

/// What a binary is bound to: the device that made it.
pub fn device_context(
    platform: cl3::types::cl_platform_id,
    device: cl3::types::cl_device_id,
) -> Vec<u8> {
    let identity = super::profile::device_identity(platform, device);
    format!("{}\0{identity}", identity.vendor_id).into_bytes()
}

fn tagger(device: &[u8]) -> Hmac<Sha256> {
    let mut mac = key().mac();
    // Length first, so no (device, binary) split of the same bytes collides.
    mac.update(&(device.len() as u64).to_le_bytes());
    mac.update(device);
    mac
}

/// The driver's `binary` for `device` as a guest gets it.
pub fn seal(device: &[u8], binary: &[u8]) -> Vec<u8> {
    let mut mac = tagger(device);
    mac.update(binary);
    let tag = mac.finalize().into_bytes();
    let mut out = Vec::with_capacity(SEAL_OVERHEAD + binary.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&tag);
    out.extend_from_slice(binary);
    out
}

/// The driver's bytes of a binary a guest gives back, if it was sealed for
/// `device` under this host's key; `CL_INVALID_BINARY` otherwise, as
/// native OpenCL answers a binary that is not one of the device's.
pub fn unseal<'a>(device: &[u8], sealed: &'a [u8]) -> Result<&'a [u8], Status> {
    let rest = sealed.strip_prefix(MAGIC).ok_or(Status::INVALID_BINARY)?;
    if rest.len() <= TAG_LEN {
        return Err(Status::INVALID_BINARY);
    }
    let (tag, binary) = rest.split_at(TAG_LEN);
    let mut mac = tagger(device);
    mac.update(binary);
    // Compared in constant time: a guest learns nothing of the right tag.
    mac.verify_slice(tag).map_err(|_| Status::INVALID_BINARY)?;
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_binary_unseals_to_the_driver_bytes_on_its_device_only() {
        let sealed = seal(b"gpu", b"driver bytes");
        assert_eq!(sealed.len(), SEAL_OVERHEAD + 12);
        assert_eq!(unseal(b"gpu", &sealed), Ok(&b"driver bytes"[..]));
        assert_eq!(unseal(b"cpu", &sealed), Err(Status::INVALID_BINARY));
        assert_eq!(unseal(b"gpudriver", &seal(b"gpu", b"driver")).ok(), None);
    }

    #[test]
    fn forged_truncated_or_bare_binaries_are_invalid() {
        let unseal = |sealed: &[u8]| unseal(b"gpu", sealed).map(<[u8]>::to_vec);
        let sealed = seal(b"gpu", b"driver bytes");
        let mut flipped = sealed.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(unseal(&flipped), Err(Status::INVALID_BINARY));
        let mut tag = sealed.clone();
        tag[MAGIC.len()] ^= 1;
        assert_eq!(unseal(&tag), Err(Status::INVALID_BINARY));
        assert_eq!(
            unseal(&sealed[..SEAL_OVERHEAD]),
            Err(Status::INVALID_BINARY)
        );
        assert_eq!(unseal(b"driver bytes"), Err(Status::INVALID_BINARY));
        assert_eq!(unseal(b""), Err(Status::INVALID_BINARY));
    }

    #[test]
    fn a_key_file_is_created_once_and_read_back() {
        let dir = std::env::temp_dir().join(format!("vgpu-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("binary-key");
        let made = BinaryKey::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let read = BinaryKey::load_or_create(&path).unwrap();
        assert_eq!(made.0, read.0);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            BinaryKey::load_or_create(&path),
            Err(KeyError::Exposed(..))
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, b"short").unwrap();
        assert!(matches!(
            BinaryKey::load_or_create(&path),
            Err(KeyError::Length(_, 5))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
