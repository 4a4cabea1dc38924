"""A PyTorch training loop to checkpoint mid-run (checkpoint.sh with
CKPT_PROGRAM=torch_ckpt.py): ITERATIONS rounds of 10 SGD steps of the MLP of
torch_mlp.py, each round printing "PROGRESS n loss ..." and then pausing
PAUSE_MS, so the checkpoint falls between steps while the model, the
optimizer's state, cuBLAS's handle and workspace all live on the GPU. The
output must equal a native run's."""
import sys
import time

import torch

iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 30
pause = (int(sys.argv[2]) if len(sys.argv) > 2 else 100) / 1000
dev = torch.device("cuda")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
xs = torch.randn(256, 64, device=dev)
ys = torch.randint(0, 10, (256,), device=dev)
for i in range(1, iterations + 1):
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
    print("PROGRESS %d loss %.6f" % (i, float(loss)), flush=True)
    time.sleep(pause)
print("torch checkpoint loop: done", flush=True)
