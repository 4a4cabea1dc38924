"""PyTorch through the CUDA runtime: availability, a matmul, and a small
MLP trained for 100 SGD steps (losses printed every 10 steps; run natively
and through vgpu, the outputs must be identical)."""
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
model = torch.nn.Sequential(
    torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
xs = torch.randn(256, 64, device=dev)
ys = torch.randint(0, 10, (256,), device=dev)
for step in range(100):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(xs), ys)
    loss.backward()
    opt.step()
    if step % 10 == 9:
        print("step %3d loss %.6f" % (step + 1, float(loss)), flush=True)
torch.cuda.synchronize()
print("torch: PASS")
