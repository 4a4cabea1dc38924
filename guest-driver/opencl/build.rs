//! Binds the library's references to its own exported `cl*` symbols at link
//! time. Without it, the dispatch table's function addresses would resolve
//! through the GOT to the ICD loader's identically named trampolines (the
//! loader is loaded first, globally), and every dispatched call would loop
//! back into the loader.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
}
