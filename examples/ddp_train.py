"""Data-parallel training at demo scale: every node's rank fits the same small model on its
own shard of the data, and the ranks average their gradients every step, so they end with
the same weights, as PyTorch's DistributedDataParallel does.

The ranks meet through the job-environment contract every backend sets: ``QM_NNODES``
processes, this one ``QM_NODE_RANK``, rank 0 listening at ``QM_MASTER_ADDR:QM_MASTER_PORT``.
With PyTorch on the nodes the all-reduce is ``torch.distributed`` (gloo); without it, the
same all-reduce over plain TCP (rank 0 sums what every rank sends and sends the sum back),
so the template runs on any node with ``python3``.

    qm submit --file examples/ddp_train.py --nodes 2 --gpus 1 --walltime 10m --wait -- python3 ddp_train.py

Rank 0 writes ``checkpoint.json`` (the weights, the loss, how the ranks met) in the job's
working directory. The job fails if the ranks end with different weights.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sys
import time
from typing import Protocol

TRUE_SLOPE, TRUE_BIAS = 3.0, 1.0


class AllReduce(Protocol):
    how: str

    def mean(self, values: list[float]) -> list[float]: ...

    def close(self) -> None: ...


class TorchAllReduce:
    """``torch.distributed`` with the gloo backend (CPU tensors: works with or without GPUs)."""

    how = "torch.distributed (gloo)"

    def __init__(self, rank: int, world: int, addr: str, port: int) -> None:
        import torch.distributed as dist

        self.dist = dist
        dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world)
        self.world = world

    def mean(self, values: list[float]) -> list[float]:
        import torch

        tensor = torch.tensor(values, dtype=torch.float64)
        self.dist.all_reduce(tensor)
        return [v / self.world for v in tensor.tolist()]

    def close(self) -> None:
        self.dist.destroy_process_group()


class TcpAllReduce:
    """A star all-reduce over TCP: rank 0 accepts every other rank, sums, sends the sum back."""

    how = "plain TCP (PyTorch not installed)"

    def __init__(self, rank: int, world: int, addr: str, port: int, timeout: float = 60.0) -> None:
        self.rank, self.world = rank, world
        self.peers: list[tuple[socket.socket, object]] = []
        if world == 1:
            return
        if rank == 0:
            with socket.create_server(("", port), reuse_port=False) as server:
                server.settimeout(timeout)
                for _ in range(world - 1):
                    conn, _ = server.accept()
                    self.peers.append((conn, conn.makefile("rw")))
        else:
            conn = _connect(addr, port, timeout)
            self.peers.append((conn, conn.makefile("rw")))

    def mean(self, values: list[float]) -> list[float]:
        if self.world == 1:
            return values
        if self.rank == 0:
            total = list(values)
            for _, stream in self.peers:
                for i, v in enumerate(json.loads(stream.readline())):  # type: ignore[attr-defined]
                    total[i] += v
            mean = [v / self.world for v in total]
            for _, stream in self.peers:
                stream.write(json.dumps(mean) + "\n")  # type: ignore[attr-defined]
                stream.flush()  # type: ignore[attr-defined]
            return mean
        _, stream = self.peers[0]
        stream.write(json.dumps(values) + "\n")  # type: ignore[attr-defined]
        stream.flush()  # type: ignore[attr-defined]
        return json.loads(stream.readline())  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        for conn, _ in self.peers:
            conn.close()


def _connect(addr: str, port: int, timeout: float) -> socket.socket:
    """Rank 0 may start after this rank: try again until it listens, up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection((addr, port), timeout=timeout)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def all_reduce(rank: int, world: int, addr: str, port: int) -> AllReduce:
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        return TcpAllReduce(rank, world, addr, port)
    return TorchAllReduce(rank, world, addr, port)


def shard(rank: int, world: int, samples: int) -> list[tuple[float, float]]:
    """This rank's share of one fixed dataset (y = 3x + 1 + noise), the same on every node."""
    rng = random.Random(42)
    data = [(x, TRUE_SLOPE * x + TRUE_BIAS + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(samples))]
    return data[rank::world]


def gradient(weights: list[float], data: list[tuple[float, float]]) -> tuple[list[float], float]:
    """The mean-squared error's gradient and the loss on ``data``."""
    slope, bias = weights
    g_slope = g_bias = loss = 0.0
    for x, y in data:
        error = slope * x + bias - y
        g_slope += 2 * error * x
        g_bias += 2 * error
        loss += error * error
    n = max(1, len(data))
    return [g_slope / n, g_bias / n], loss / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", type=float, default=0.3)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--checkpoint", default="checkpoint.json")
    args = parser.parse_args()

    rank, world = int(os.environ.get("QM_NODE_RANK", "0")), int(os.environ.get("QM_NNODES", "1"))
    addr, port = os.environ.get("QM_MASTER_ADDR", "127.0.0.1"), int(os.environ.get("QM_MASTER_PORT", "29500"))
    reducer = all_reduce(rank, world, addr, port)
    print(f"rank {rank} of {world}: all-reduce by {reducer.how}, master {addr}:{port}", flush=True)
    data = shard(rank, world, args.samples)
    weights = [0.0, 0.0]
    loss = float("nan")
    for step in range(1, args.steps + 1):
        grad, local_loss = gradient(weights, data)
        *grad, loss = reducer.mean([*grad, local_loss])
        weights = [w - args.lr * g for w, g in zip(weights, grad, strict=True)]
        if step % 10 == 0 or step == 1:
            print(f"rank {rank} step {step}: loss {loss:.4f} slope {weights[0]:.3f} bias {weights[1]:.3f}", flush=True)
    # Every rank must hold the same weights: their mean equals each rank's own.
    agreed = reducer.mean(weights)
    reducer.close()
    if any(abs(a - w) > 1e-9 for a, w in zip(agreed, weights, strict=True)):
        print(f"rank {rank}: weights {weights} differ from the ranks' mean {agreed}", file=sys.stderr)
        return 1
    if rank == 0:
        result = {"slope": weights[0], "bias": weights[1], "loss": loss, "ranks": world, "all_reduce": reducer.how}
        with open(args.checkpoint, "w") as out:
            json.dump(result, out, indent=2)
        print(f"rank 0: wrote {args.checkpoint}: {result}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
