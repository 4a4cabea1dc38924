"""PyTorch training-step speed (a benchmark, never a test): the MLP of
torch_mlp.py and the small CNN, each trained for a warm-up and then for
STEPS timed steps, synchronised at the end. Prints one JSON object:
seconds per step for each model, and the process's cold start (interpreter
start to the first kernel's result)."""
import json
import os
import sys
import time

# Cold start: from the process's own start (its /proc start time) to the
# first kernel's result.
with open("/proc/self/stat") as f:
    started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
with open("/proc/uptime") as f:
    uptime = float(f.read().split()[0])
process_age = uptime - started_ticks / os.sysconf("SC_CLK_TCK")
t0 = time.perf_counter()
import torch  # noqa: E402

dev = torch.device("cuda")
float(torch.ones(1, device=dev).sum())
cold_start = process_age + (time.perf_counter() - t0)

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 500
WARMUP = 20
torch.manual_seed(0)


def timed(model, xs, ys):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        return loss

    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(STEPS):
        loss = step()
    final = float(loss)  # waits for the last step
    return (time.perf_counter() - start) / STEPS, final


mlp = torch.nn.Sequential(
    torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
).to(dev)
mlp_step, mlp_loss = timed(
    mlp, torch.randn(256, 64, device=dev), torch.randint(0, 10, (256,), device=dev)
)
cnn = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(), torch.nn.Linear(32, 10),
).to(dev)
cnn_step, cnn_loss = timed(
    cnn, torch.randn(64, 3, 32, 32, device=dev), torch.randint(0, 10, (64,), device=dev)
)
print(json.dumps({
    "steps": STEPS,
    "mlp_s_per_step": mlp_step,
    "mlp_final_loss": mlp_loss,
    "cnn_s_per_step": cnn_step,
    "cnn_final_loss": cnn_loss,
    "cold_start_s": cold_start,
}))
