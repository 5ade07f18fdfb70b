"""A stand-in for a training script, small enough to run anywhere: it reports where it
runs (the job-environment contract every backend sets) and "trains" for a few steps.

    qm submit --file examples/train.py --gpus 1 --walltime 10m --wait -- python3 train.py
"""

import os
import time

rank, nodes = os.environ.get("QM_NODE_RANK", "0"), os.environ.get("QM_NNODES", "1")
print(f"train.py: rank {rank} of {nodes} on {os.environ.get('QM_NODELIST', '?')}", flush=True)
print(f"train.py: GPUs {os.environ.get('CUDA_VISIBLE_DEVICES', '') or 'none'}", flush=True)
loss = 2.0
for step in range(1, 6):
    loss *= 0.7
    print(f"step {step}: loss {loss:.3f}", flush=True)
    time.sleep(0.2)
print("train.py: done", flush=True)
