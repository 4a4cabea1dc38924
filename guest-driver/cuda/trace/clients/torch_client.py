"""PyTorch: availability, matmul, conv2d forward+backward, a 50-step training loop."""
import torch

print("available", torch.cuda.is_available(), torch.version.cuda)
dev = torch.device("cuda")
a = torch.randn(512, 512, device=dev)
print("matmul", float((a @ a).sum()) != 0)
conv = torch.nn.Conv2d(3, 8, 3).to(dev)
img = torch.randn(4, 3, 32, 32, device=dev, requires_grad=True)
conv(img).sum().backward()
print("conv2d", img.grad.shape)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
xs = torch.randn(256, 64, device=dev)
ys = torch.randint(0, 10, (256,), device=dev)
for step in range(50):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(xs), ys)
    loss.backward()
    opt.step()
print("loss", round(float(loss), 3))
torch.cuda.synchronize()
print("torch: PASS")
