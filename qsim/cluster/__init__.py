"""Where independent work runs: this process, a LocalCluster of worker processes, or an existing
Dask cluster (distributed.py), with the cluster's size cap and configuration (local_cluster.py)
and the scheduler address checked before Dask sees it (scheduler_address.py). Below quant/ and
npu/ in the layers, so both the NPU's simulate and the quantizer's evaluation run on it."""
