//! Binds the library's references to its own exported `cu*` symbols, so the
//! addresses `cuGetProcAddress` hands out are this library's even when
//! another libcuda is loaded in the process, and names the library as the
//! driver it stands in for.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
}
