//! Vector add and a scaled copy on a second stream, through cudarc's safe
//! API, loading the PTX that `nvcc -ptx` made of `kernels.cu`. Prints
//! results that must be identical natively and through vgpu.

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

fn checksum(x: &[f32]) -> u64 {
    x.iter().fold(1469598103934665603u64, |h, v| {
        (h ^ u64::from(v.to_bits())).wrapping_mul(1099511628211)
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ptx = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "kernels.ptx".into());
    let ctx = CudaContext::new(0)?;
    println!("device: {}", ctx.name()?);
    let module = ctx.load_module(Ptx::from_file(ptx))?;
    let vec_add = module.load_function("vec_add")?;
    let scale = module.load_function("scale")?;

    let n = 1usize << 20;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let b: Vec<f32> = (0..n).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    let stream = ctx.default_stream();
    let da = stream.clone_htod(&a)?;
    let db = stream.clone_htod(&b)?;
    let mut dc = stream.alloc_zeros::<f32>(n)?;
    let n_i32 = n as i32;
    let cfg = LaunchConfig::for_num_elems(n as u32);
    let mut launch = stream.launch_builder(&vec_add);
    launch.arg(&da).arg(&db).arg(&mut dc).arg(&n_i32);
    // SAFETY: the arguments match the kernel's signature.
    unsafe { launch.launch(cfg) }?;
    let c = stream.clone_dtoh(&dc)?;
    let bad = (0..n).filter(|&i| c[i] != a[i] + b[i]).count();
    println!(
        "vec_add n={n} mismatches={bad} checksum={:016x}",
        checksum(&c)
    );

    let other = ctx.new_stream()?;
    let mut dx = other.clone_htod(&c)?;
    let factor = 2.0f32;
    let mut launch = other.launch_builder(&scale);
    launch.arg(&mut dx).arg(&factor).arg(&n_i32);
    // SAFETY: as above.
    unsafe { launch.launch(cfg) }?;
    let x = other.clone_dtoh(&dx)?;
    other.synchronize()?;
    println!("scale on a second stream checksum={:016x}", checksum(&x));
    println!("ok");
    Ok(())
}
