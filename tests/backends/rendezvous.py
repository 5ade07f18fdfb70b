"""A multi-node rendezvous in the manner of torch.distributed's, with the stdlib only:
every rank reads the job-environment contract (scheduler/backends/job_env.py), ranks
1..N-1 connect to rank 0 at QM_MASTER_ADDR:QM_MASTER_PORT over TCP and send their rank,
and rank 0 checks it saw every rank once. The multi-node tests run it as a job's script
(``as_job_script``) on the local backend and on the Slurm dev cluster.
"""

import os
import socket
import time

rank, nodes = int(os.environ["QM_NODE_RANK"]), int(os.environ["QM_NNODES"])
addr, port = os.environ["QM_MASTER_ADDR"], int(os.environ["QM_MASTER_PORT"])
assert os.environ["NODE_RANK"] == str(rank), "NODE_RANK differs from QM_NODE_RANK"
assert (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]) == (addr, str(port)), "MASTER_* differ from QM_MASTER_*"
gpus = int(os.environ["QM_GPUS_PER_NODE"])
assert os.environ["WORLD_SIZE"] == str(nodes * max(1, gpus)), "WORLD_SIZE is not nodes x GPUs per node"
print(f"rank {rank} of {nodes}: gpus={os.environ.get('CUDA_VISIBLE_DEVICES', '')} master={addr}:{port}", flush=True)

if rank == 0:
    with socket.create_server(("", port)) as server:
        server.settimeout(120)
        seen = [0]
        while len(seen) < nodes:
            connection, _ = server.accept()
            with connection:
                seen.append(int(connection.recv(16).decode()))
                connection.sendall(b"ok")
    assert sorted(seen) == list(range(nodes)), f"saw ranks {sorted(seen)}"
    print(f"rendezvous ok: ranks {sorted(seen)}", flush=True)
else:
    deadline = time.monotonic() + 120  # rank 0 may start later than this rank
    while True:
        try:
            connection = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with connection:
        connection.sendall(str(rank).encode())
        assert connection.recv(2) == b"ok"
    print(f"rank {rank} joined", flush=True)
