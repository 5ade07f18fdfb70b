"""The GPU node agent: a program of its own, run on each GPU node beside the workload
manager, that reads the node's GPUs (NVML or a DCGM exporter) and posts the samples to the
portal's ingest API. It imports nothing of the portal (stdlib plus its collector's library)."""
