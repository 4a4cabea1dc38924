//! Context-local storage (`c693336e-…`): cudart keeps its per-context
//! state under a key of its own in each driver context. Three slots, no
//! size word: put (context, key, value, destructor), delete (context,
//! key), get (value out, context, key); a NULL context means the current
//! one. The destructors run when the context goes (`cuCtxDestroy`, the
//! primary context's reset or last release), as the driver runs them.
//! A key never put answers `CUDA_ERROR_INVALID_HANDLE`, and a NULL context
//! with none current `CUDA_ERROR_INVALID_CONTEXT`, as the driver does
//! (measured in a PyTorch matmul under cutrace: 95 gets answered 0, 5
//! answered 400, 1 answered 201; `traces/README.md`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, PoisonError};

use super::Table;
use crate::ffi::{guard, handle, put, result, to_ptr, CUresult, CuResult, Handle};
use crate::runtime::require_context;

/// `void (*)(CUcontext, void *key, void *value)`.
pub type Destructor = Option<unsafe extern "C" fn(Handle, *mut c_void, *mut c_void)>;

#[derive(Clone, Copy)]
struct Entry {
    value: usize,
    destructor: Destructor,
}

/// (context handle, key) → value.
static STORAGE: Mutex<Option<HashMap<(u64, usize), Entry>>> = Mutex::new(None);

fn with_storage<T>(f: impl FnOnce(&mut HashMap<(u64, usize), Entry>) -> T) -> T {
    let mut storage = STORAGE.lock().unwrap_or_else(PoisonError::into_inner);
    f(storage.get_or_insert_with(HashMap::new))
}

fn context(ctx: Handle) -> CuResult<u64> {
    match handle(ctx) {
        0 => require_context(),
        ctx => Ok(ctx),
    }
}

extern "C" fn put_value(
    ctx: Handle,
    key: *mut c_void,
    value: *mut c_void,
    destructor: Destructor,
) -> CUresult {
    guard("context-local storage put", || {
        let ctx = context(ctx)?;
        let entry = Entry {
            value: value as usize,
            destructor,
        };
        with_storage(|s| s.insert((ctx, key as usize), entry));
        Ok(())
    })
}

extern "C" fn delete_value(ctx: Handle, key: *mut c_void) -> CUresult {
    guard("context-local storage delete", || {
        let ctx = context(ctx)?;
        with_storage(|s| s.remove(&(ctx, key as usize)));
        Ok(())
    })
}

extern "C" fn get_value(value: *mut *mut c_void, ctx: Handle, key: *mut c_void) -> CUresult {
    guard("context-local storage get", || {
        let ctx = context(ctx)?;
        match with_storage(|s| s.get(&(ctx, key as usize)).copied()) {
            Some(entry) => put(value, entry.value as *mut c_void),
            None => Err(result::ERROR_INVALID_HANDLE),
        }
    })
}

/// The slots as the traces show them; the fourth word is not a function.
pub static TABLE: Table<4> = Table::new([
    put_value as *const c_void,
    delete_value as *const c_void,
    get_value as *const c_void,
    std::ptr::null(),
]);

/// Runs and drops the destructors of a context that is going away.
pub fn context_gone(ctx: u64) {
    let gone: Vec<((u64, usize), Entry)> = with_storage(|s| {
        let keys: Vec<_> = s.keys().filter(|(c, _)| *c == ctx).copied().collect();
        keys.into_iter()
            .filter_map(|k| s.remove_entry(&k))
            .collect()
    });
    for ((ctx, key), entry) in gone {
        if let Some(destructor) = entry.destructor {
            // SAFETY: the application registered this callback for this
            // context and key, to be called when the context goes.
            unsafe { destructor(to_ptr(ctx), key as *mut c_void, entry.value as *mut c_void) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    type Put = extern "C" fn(Handle, *mut c_void, *mut c_void, Destructor) -> CUresult;
    type Delete = extern "C" fn(Handle, *mut c_void) -> CUresult;
    type Get = extern "C" fn(*mut *mut c_void, Handle, *mut c_void) -> CUresult;

    /// The table's slots, called the way cudart calls them.
    fn slots() -> (Put, Delete, Get) {
        let table = super::super::table(&super::super::CONTEXT_LOCAL_STORAGE).expect("served");
        let words = table.cast::<*const c_void>();
        // SAFETY: the table has these three functions, of these types, first.
        unsafe {
            (
                std::mem::transmute::<*const c_void, Put>(*words),
                std::mem::transmute::<*const c_void, Delete>(*words.add(1)),
                std::mem::transmute::<*const c_void, Get>(*words.add(2)),
            )
        }
    }

    static DESTROYED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn count_destroy(ctx: Handle, key: *mut c_void, value: *mut c_void) {
        assert_eq!((ctx as usize, key as usize), (0x7001, 0x10));
        DESTROYED.fetch_add(value as usize, Ordering::SeqCst);
    }

    #[test]
    fn values_are_kept_per_context_and_key() {
        let (put, delete, get) = slots();
        let (a, b, key) = (0x7101 as Handle, 0x7102 as Handle, 0x20 as *mut c_void);
        let mut out = std::ptr::null_mut();
        assert_eq!(get(&mut out, a, key), result::ERROR_INVALID_HANDLE);
        assert_eq!(put(a, key, 0x111 as *mut c_void, None), result::SUCCESS);
        assert_eq!(put(b, key, 0x222 as *mut c_void, None), result::SUCCESS);
        assert_eq!(get(&mut out, a, key), result::SUCCESS);
        assert_eq!(out as usize, 0x111);
        assert_eq!(get(&mut out, b, key), result::SUCCESS);
        assert_eq!(out as usize, 0x222);
        assert_eq!(delete(a, key), result::SUCCESS);
        assert_eq!(get(&mut out, a, key), result::ERROR_INVALID_HANDLE);
        assert_eq!(get(&mut out, b, key), result::SUCCESS);
    }

    #[test]
    fn null_context_without_a_current_one_is_an_invalid_context() {
        let (put, _, get) = slots();
        let mut out = std::ptr::null_mut();
        let key = 0x30 as *mut c_void;
        assert_eq!(
            put(std::ptr::null_mut(), key, key, None),
            result::ERROR_INVALID_CONTEXT
        );
        assert_eq!(
            get(&mut out, std::ptr::null_mut(), key),
            result::ERROR_INVALID_CONTEXT
        );
    }

    #[test]
    fn destructors_run_once_when_the_context_goes() {
        let (put, _, get) = slots();
        let ctx = 0x7001 as Handle;
        let key = 0x10 as *mut c_void;
        assert_eq!(
            put(ctx, key, 5 as *mut c_void, Some(count_destroy)),
            result::SUCCESS
        );
        context_gone(0x7001);
        context_gone(0x7001);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 5);
        let mut out = std::ptr::null_mut();
        assert_eq!(get(&mut out, ctx, key), result::ERROR_INVALID_HANDLE);
    }
}
