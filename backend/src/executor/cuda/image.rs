//! What architectures a module image holds code for: the `.target` of PTX,
//! the SM of a cubin (its ELF header's `e_flags`), and both for each entry
//! of a fat binary. A snapshot records them so a destination GPU that can
//! run none of the code is refused before anything is rebuilt.

use vgpu_migration::CudaArch;
use vgpu_protocol::cuda::{ImageKind, FATBIN_MAGIC};

/// The code an image holds: the lowest PTX target (`None`: no PTX) and the
/// architectures of its cubins (empty when unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageArchs {
    pub ptx_target: Option<CudaArch>,
    pub cubins: Vec<CudaArch>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// `sm_XY` from a PTX `.target` directive (the first one).
pub fn ptx_target(ptx: &[u8]) -> Option<CudaArch> {
    let text = String::from_utf8_lossy(&ptx[..ptx.len().min(1 << 20)]);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(".target"))?;
    line[".target".len()..]
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(|t| t.strip_prefix("sm_"))
        .find_map(|t| {
            let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok().map(CudaArch::from_sm)
        })
}

/// The SM a cubin was built for, from its ELF header. Up to sm_90 the SM
/// number sits in the low byte of `e_flags` (`EF_CUDA_SM`, 0x14..=0x5a);
/// the newer ABI (CUDA 12.8 on, every SM) keeps it in bits 8..15, with only
/// small flags in the low byte.
pub fn cubin_arch(elf: &[u8]) -> Option<CudaArch> {
    if !elf.starts_with(&vgpu_protocol::cuda::ELF_MAGIC) || elf.get(4) != Some(&2) {
        return None;
    }
    let flags = u32_at(elf, 0x30)?;
    let low = flags & 0xff;
    let sm = if (0x14..=0x5a).contains(&low) {
        low
    } else {
        (flags >> 8) & 0xff
    };
    (sm >= 0x14).then(|| CudaArch::from_sm(sm))
}

/// Walks a fat binary's entries (kind 1: PTX, 2: ELF; the SM at byte 28 of
/// each entry's header).
pub fn fatbin_archs(fatbin: &[u8]) -> ImageArchs {
    let mut out = ImageArchs::default();
    if u32_at(fatbin, 0) != Some(FATBIN_MAGIC) {
        return out;
    }
    let (Some(header), Some(size)) = (u16_at(fatbin, 6), u64_at(fatbin, 8)) else {
        return out;
    };
    let start = usize::from(header);
    let end = usize::try_from(size)
        .ok()
        .and_then(|s| start.checked_add(s))
        .map_or(fatbin.len(), |e| e.min(fatbin.len()));
    let mut at = start;
    while at < end {
        let (Some(kind), Some(entry_header), Some(payload), Some(sm)) = (
            u16_at(fatbin, at),
            u32_at(fatbin, at + 4),
            u64_at(fatbin, at + 8),
            u32_at(fatbin, at + 28),
        ) else {
            break;
        };
        if (0x14..1000).contains(&sm) {
            let arch = CudaArch::from_sm(sm);
            match kind {
                1 => out.ptx_target = Some(out.ptx_target.map_or(arch, |t| t.min(arch))),
                2 => out.cubins.push(arch),
                _ => {}
            }
        }
        let next = usize::try_from(entry_header)
            .ok()
            .zip(usize::try_from(payload).ok())
            .and_then(|(h, p)| at.checked_add(h)?.checked_add(p));
        match next {
            Some(next) if next > at => at = next,
            _ => break,
        }
    }
    out
}

/// The code an image of `kind` holds.
pub fn archs(kind: ImageKind, image: &[u8]) -> ImageArchs {
    match kind {
        ImageKind::Ptx => ImageArchs {
            ptx_target: ptx_target(image),
            cubins: Vec::new(),
        },
        ImageKind::Cubin => ImageArchs {
            ptx_target: None,
            cubins: cubin_arch(image).into_iter().collect(),
        },
        ImageKind::Fatbin => fatbin_archs(image),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_targets_are_read() {
        let ptx = b"//\n// Generated\n.version 8.8\n.target sm_90\n.address_size 64\n";
        assert_eq!(ptx_target(ptx), Some(CudaArch::new(9, 0)));
        assert_eq!(
            ptx_target(b".version 8.0\n  .target sm_90a, debug\n"),
            Some(CudaArch::new(9, 0))
        );
        assert_eq!(ptx_target(b".target sm_120\n"), Some(CudaArch::new(12, 0)));
        assert_eq!(ptx_target(b".version 8.0\n"), None);
        assert_eq!(ptx_target(b".target\n"), None);
    }

    fn elf(flags: u32) -> Vec<u8> {
        let mut e = vec![0u8; 64];
        e[..4].copy_from_slice(&vgpu_protocol::cuda::ELF_MAGIC);
        e[4] = 2;
        e[0x30..0x34].copy_from_slice(&flags.to_le_bytes());
        e
    }

    #[test]
    fn cubin_architectures_are_read_in_both_encodings() {
        // Old ABI: sm_80 and sm_90 (virtual SM in bits 16..23).
        assert_eq!(cubin_arch(&elf(0x0050_0550)), Some(CudaArch::new(8, 0)));
        assert_eq!(cubin_arch(&elf(0x005a_055a)), Some(CudaArch::new(9, 0)));
        // New ABI: sm_90, sm_100a, sm_120a.
        assert_eq!(cubin_arch(&elf(0x0600_5a04)), Some(CudaArch::new(9, 0)));
        assert_eq!(cubin_arch(&elf(0x0600_6402)), Some(CudaArch::new(10, 0)));
        assert_eq!(cubin_arch(&elf(0x0600_7802)), Some(CudaArch::new(12, 0)));
        assert_eq!(cubin_arch(&elf(0)), None);
        assert_eq!(cubin_arch(&elf(0x0050_0550)[..0x31]), None);
        assert_eq!(cubin_arch(b"not an elf"), None);
    }

    fn entry(kind: u16, sm: u32, payload: usize) -> Vec<u8> {
        let mut e = vec![0u8; 64 + payload];
        e[0..2].copy_from_slice(&kind.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&(payload as u64).to_le_bytes());
        e[28..32].copy_from_slice(&sm.to_le_bytes());
        e
    }

    fn fatbin(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut f = vec![0u8; 16];
        f[0..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
        f[4..6].copy_from_slice(&1u16.to_le_bytes());
        f[6..8].copy_from_slice(&16u16.to_le_bytes());
        f[8..16].copy_from_slice(&(body.len() as u64).to_le_bytes());
        f.extend(body);
        f
    }

    #[test]
    fn fat_binary_entries_are_walked() {
        let f = fatbin(&[entry(2, 80, 100), entry(2, 90, 7), entry(1, 90, 33)]);
        assert_eq!(
            archs(ImageKind::Fatbin, &f),
            ImageArchs {
                ptx_target: Some(CudaArch::new(9, 0)),
                cubins: vec![CudaArch::new(8, 0), CudaArch::new(9, 0)],
            }
        );
        // Cubins only.
        let f = fatbin(&[entry(2, 90, 10)]);
        assert_eq!(fatbin_archs(&f).ptx_target, None);
        // Truncated or lying entries stop the walk, never panic.
        let mut f = fatbin(&[entry(2, 90, 10), entry(1, 75, 10)]);
        f.truncate(100);
        assert_eq!(fatbin_archs(&f).cubins, vec![CudaArch::new(9, 0)]);
        let mut f = fatbin(&[entry(2, 90, 10)]);
        f[16 + 8..16 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(fatbin_archs(&f).cubins, vec![CudaArch::new(9, 0)]);
        assert_eq!(fatbin_archs(b"junk"), ImageArchs::default());
    }
}
