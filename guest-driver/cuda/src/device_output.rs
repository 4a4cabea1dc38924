//! What kernels printed, written to the program's standard output. The
//! driver prints through the C library's `stdout` stream, so this does
//! too: lines the program printed before its synchronization stay before
//! the kernel's, however `stdout` is buffered.

extern "C" {
    /// The C library's standard output stream.
    static mut stdout: *mut libc::FILE;
}

/// Appends `bytes` to the program's `stdout`.
pub fn print(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    // SAFETY: `stdout` is the C library's stream, initialized before any
    // program code runs; `fwrite` locks it and reads `bytes.len()` bytes.
    unsafe {
        let stream = std::ptr::addr_of!(stdout).read();
        libc::fwrite(bytes.as_ptr().cast(), 1, bytes.len(), stream);
    }
}
