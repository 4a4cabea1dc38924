//! `cuGetExportTable`: the undocumented tables, keyed by UUID, through
//! which every copy of cudart reaches the driver (`traces/README.md` lists
//! what CUDA 13 runtimes ask for, and which slots they call). Served here
//! are only the guest-local tables whose slots are understood from the
//! traces and ZLUDA's `dark_api` notes; any other UUID, including tables
//! cudart needs that are not served yet, answers as the real driver
//! answers an unknown one: `CUDA_ERROR_INVALID_VALUE` and a NULL table.

use std::ffi::c_void;

use crate::ffi::{entry, get, put, result, CUresult, CuResult};

mod checks;
mod cls;
mod integrity;
mod module_functions;
mod nvml;
mod tools;
mod tools_context;

pub use cls::context_gone;

/// `CUuuid`.
pub type Uuid = [u8; 16];

/// An export table: a row of words, most of them functions. Most tables
/// start with their own size in bytes. Zero words follow it: callers read
/// words past the tables served here (data words the real driver keeps at
/// 0), and what they found there depended on how this library was linked
/// (PyTorch crashed with one build and not with another).
#[repr(C)]
pub struct Table<const N: usize>(pub [*const c_void; N], [*const c_void; TABLE_PADDING]);

/// Zero words after every served table.
const TABLE_PADDING: usize = 128;

impl<const N: usize> Table<N> {
    pub const fn new(words: [*const c_void; N]) -> Table<N> {
        Table(words, [std::ptr::null(); TABLE_PADDING])
    }
}

// SAFETY: the words are addresses of functions and integers, never written
// after start-up; sharing them between threads is what the driver does.
unsafe impl<const N: usize> Sync for Table<N> {}

/// The size word that opens most tables.
pub const fn size_word<const N: usize>() -> *const c_void {
    (N * std::mem::size_of::<usize>()) as *const c_void
}

/// Fills the slots a table has but nobody was seen calling: callable, and
/// never a silent success.
pub extern "C" fn not_supported() -> CUresult {
    log::debug!("an export-table slot vgpu does not implement was called");
    result::ERROR_NOT_SUPPORTED
}

/// A slot that answers `CUDA_ERROR_NOT_SUPPORTED`.
pub const NS: *const c_void = not_supported as *const c_void;

/// A table of `N` words: the size word, then `CUDA_ERROR_NOT_SUPPORTED`.
pub const fn refusing<const N: usize>() -> [*const c_void; N] {
    let mut words = [NS; N];
    words[0] = size_word::<N>();
    words
}

/// Parses "xxxxxxxx-xxxx-..." at compile time (the byte order is the
/// in-memory one, as the traces print it).
const fn uuid(text: &str) -> Uuid {
    const fn hex(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("not a lower-case hex digit"),
        }
    }
    let bytes = text.as_bytes();
    let mut out = [0u8; 16];
    let (mut i, mut n) = (0, 0);
    while i < bytes.len() {
        if bytes[i] != b'-' {
            out[n / 2] |= hex(bytes[i]) << if n % 2 == 0 { 4 } else { 0 };
            n += 1;
        }
        i += 1;
    }
    assert!(n == 32, "a UUID has 32 hex digits");
    out
}

pub const CONTEXT_LOCAL_STORAGE: Uuid = uuid("c693336e-1121-df11-a8c3-68f355d89593");
pub const CONTEXT_CHECKS: Uuid = uuid("263e8860-7cd2-6143-92f6-bbd5006dfa7e");
pub const TOOLS_RUNTIME_CALLBACK_HOOKS: Uuid = uuid("a094798c-2e74-2e74-93f2-0800200c0a66");
pub const TOOLS_TLS: Uuid = uuid("42d85a81-23f6-cb47-8298-f6e78a3aecdc");
pub const INTEGRITY_CHECK: Uuid = uuid("d4082055-bde6-704b-8d34-ba123c66e1f2");
pub const CUDART_INTERFACE: Uuid = uuid("6bd5fb6c-5bf4-e74a-8987-d93912fd9df9");
/// `CU_ETID_ToolsContext` in NVIDIA's tools headers.
pub const TOOLS_CONTEXT: Uuid = uuid("21318c60-9714-3248-8ca6-41ff7324c8f2");
/// The first table every cudart asks for; the traces show none of its two
/// functions called, and that cudart goes on without it; but cuBLAS's copy
/// of cudart was seen failing `cublasCreate` after its refusal, so it is
/// served, both functions answering `CUDA_ERROR_NOT_SUPPORTED`.
pub const CUDART_FIRST: Uuid = uuid("f8cff951-2146-8b4e-b9e2-fb469e7c0dd9");
/// Asked for by cuFFT: slot 7 lists a module's functions.
pub const MODULE_FUNCTIONS: Uuid = uuid("6e163fbe-b958-444d-835c-e182aff1991e");
/// Asked for by NVML (`libnvidia-ml.so.1`).
pub const NVML_TABLE: Uuid = uuid("69a28e9f-2449-8b47-b030-c5da330ea4e9");

static CUDART_FIRST_TABLE: Table<3> = Table::new(refusing::<3>());

/// The table for `id`, if this library serves it.
pub fn table(id: &Uuid) -> Option<*const c_void> {
    match *id {
        CONTEXT_LOCAL_STORAGE => Some(cls::TABLE.0.as_ptr().cast()),
        CONTEXT_CHECKS => Some(checks::CONTEXT_CHECKS.0.as_ptr().cast()),
        TOOLS_RUNTIME_CALLBACK_HOOKS => Some(tools::TOOL_HOOKS.0.as_ptr().cast()),
        TOOLS_TLS => Some(tools::TOOLS_TLS.0.as_ptr().cast()),
        INTEGRITY_CHECK => Some(integrity::INTEGRITY_CHECK.0.as_ptr().cast()),
        CUDART_INTERFACE => Some(integrity::CUDART_INTERFACE.0.as_ptr().cast()),
        TOOLS_CONTEXT => Some(tools_context::TOOLS_CONTEXT.0.as_ptr().cast()),
        NVML_TABLE => Some(nvml::NVML_TABLE.0.as_ptr().cast()),
        MODULE_FUNCTIONS => Some(module_functions::MODULE_FUNCTIONS.0.as_ptr().cast()),
        CUDART_FIRST => Some(CUDART_FIRST_TABLE.0.as_ptr().cast()),
        _ => None,
    }
}

/// Whether `VGPU_REFUSE_TABLES` (a debugging aid: comma-separated
/// leading hex digits of UUIDs) asks to refuse the table `id`.
fn refused_by_setting(id: &Uuid, setting: Option<&str>) -> bool {
    let Some(setting) = setting else {
        return false;
    };
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    setting
        .split(',')
        .map(str::trim)
        .any(|p| !p.is_empty() && hex.starts_with(&p.to_ascii_lowercase()))
}

fn get_export_table(out: *mut *const c_void, id: *const Uuid) -> CuResult<()> {
    let id = get(id)?;
    let setting = std::env::var("VGPU_REFUSE_TABLES").ok();
    let served = match refused_by_setting(&id, setting.as_deref()) {
        true => None,
        false => table(&id),
    };
    match served {
        Some(table) => put(out, table),
        None => {
            log::debug!("cuGetExportTable: table {id:02x?} is not served");
            put(out, std::ptr::null())?;
            Err(result::ERROR_INVALID_VALUE)
        }
    }
}

entry! {
    fn cuGetExportTable(out: *mut *const c_void, id: *const Uuid) {
        get_export_table(out, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_is_read_in_memory_order() {
        assert_eq!(CONTEXT_LOCAL_STORAGE[..4], [0xc6, 0x93, 0x33, 0x6e]);
        assert_eq!(CONTEXT_LOCAL_STORAGE[15], 0x93);
    }

    #[test]
    fn unknown_table_is_an_invalid_value_with_a_null_table() {
        // One CuPy's cuBLAS asks for (and does without): refused.
        let id = uuid("da9151d3-3ae6-cc41-a5c0-4f26d533e328");
        let mut out = 0xdead_beef_usize as *const c_void;
        // SAFETY: valid pointers to a table slot and a UUID.
        let code = unsafe { cuGetExportTable(&mut out, &id) };
        assert_eq!(code, result::ERROR_INVALID_VALUE);
        assert!(out.is_null());
        // SAFETY: a NULL UUID is refused before any read.
        let code = unsafe { cuGetExportTable(&mut out, std::ptr::null()) };
        assert_eq!(code, result::ERROR_INVALID_VALUE);
    }

    #[test]
    fn tables_can_be_refused_for_debugging() {
        assert!(refused_by_setting(&NVML_TABLE, Some("21318c60, 69A28E9F")));
        assert!(!refused_by_setting(&NVML_TABLE, Some("21318c60,")));
        assert!(!refused_by_setting(&NVML_TABLE, None));
    }

    #[test]
    fn served_tables_are_found() {
        for id in [
            CONTEXT_LOCAL_STORAGE,
            CONTEXT_CHECKS,
            TOOLS_RUNTIME_CALLBACK_HOOKS,
            TOOLS_TLS,
            INTEGRITY_CHECK,
            CUDART_INTERFACE,
            TOOLS_CONTEXT,
            NVML_TABLE,
            CUDART_FIRST,
            MODULE_FUNCTIONS,
        ] {
            let mut out = std::ptr::null();
            // SAFETY: valid pointers to a table slot and a UUID.
            assert_eq!(unsafe { cuGetExportTable(&mut out, &id) }, result::SUCCESS);
            assert_eq!(Some(out), table(&id));
        }
    }
}
