"""PyTorch through the CUDA runtime: availability, a matmul, and a small
MLP trained for 300 SGD steps (losses printed every 30 steps; run natively
and through vgpu, the outputs must be identical). Stage "conv": a conv2d
forward and backward (cuDNN) instead of the MLP; stage "cnn": a small CNN
(two convolutions, cuDNN and cuBLAS) trained for 100 steps; stage
"compile": a function through torch.compile (Triton kernels, launched
through the driver API)."""
import sys
import torch

stage = sys.argv[1] if len(sys.argv) > 1 else "all"
print("available", torch.cuda.is_available(), torch.version.cuda, flush=True)
if stage == "available":
    sys.exit(0)
dev = torch.device("cuda")
torch.manual_seed(0)
a = torch.randn(512, 512, device=dev)
print("matmul sum %.4f" % float((a @ a).sum()), flush=True)
if stage == "matmul":
    sys.exit(0)
if stage == "conv":
    conv = torch.nn.Conv2d(3, 8, kernel_size=3, padding=1).to(dev)
    img = torch.randn(4, 3, 32, 32, device=dev, requires_grad=True)
    y = conv(img)
    print("conv2d forward sum %.4f" % float(y.sum()), flush=True)
    y.square().sum().backward()
    print("conv2d backward weight-grad sum %.4f input-grad sum %.4f"
          % (float(conv.weight.grad.sum()), float(img.grad.sum())), flush=True)
    sys.exit(0)
if stage == "compile":
    @torch.compile
    def f(x, y):
        return torch.sin(x) * torch.cos(y) + x * y

    x = torch.randn(4096, device=dev)
    yv = torch.randn(4096, device=dev)
    print("compiled sum %.4f" % float(f(x, yv).sum()), flush=True)
    print("eager sum %.4f" % float((torch.sin(x) * torch.cos(yv) + x * yv).sum()), flush=True)
    sys.exit(0)
if stage == "cnn":
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(32, 10),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xs = torch.randn(64, 3, 32, 32, device=dev)
    ys = torch.randint(0, 10, (64,), device=dev)
    for step in range(100):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        if step % 20 == 19:
            print("cnn step %3d loss %.6f" % (step + 1, float(loss)), flush=True)
    torch.cuda.synchronize()
    print("cnn: PASS")
    sys.exit(0)
model = torch.nn.Sequential(
    torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
xs = torch.randn(256, 64, device=dev)
ys = torch.randint(0, 10, (256,), device=dev)
for step in range(300):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(xs), ys)
    loss.backward()
    opt.step()
    if step % 30 == 29:
        print("step %3d loss %.6f" % (step + 1, float(loss)), flush=True)
torch.cuda.synchronize()
print("torch: PASS")
