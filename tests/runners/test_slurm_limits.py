"""runners.slurm_limits without a cluster: SLURM's time and memory formats, and a request
checked against a partition read from `scontrol` output (the real local SLURM cluster runs the
same checks in tests/e2e/runners/test_slurm_limits_cluster.py)."""

import pytest

from runners import slurm_limits


@pytest.mark.parametrize("text,seconds", [
    ("30", 1800), ("30:15", 1815), ("04:00:00", 14400), ("1-00", 86400),
    ("1-12:30", 131400), ("2-00:00:01", 172801), ("UNLIMITED", None), ("INFINITE", None)])
def test_slurm_time_formats(text, seconds):
    assert slurm_limits.time_seconds(text) == seconds


@pytest.mark.parametrize("text,mb", [("4096", 4096), ("32G", 32768), ("512M", 512),
                                     ("1T", 1048576), ("0", None), (None, None)])
def test_slurm_memory_sizes(text, mb):
    assert slurm_limits.memory_mb(text) == mb


def test_check_request_against_a_partition_read_from_scontrol():
    part = slurm_limits.Partition(
        name="p", total_nodes=3, max_nodes=None, max_cpus_per_node=None,
        max_mem_per_node_mb=None, max_time_s=None,
        nodes=(slurm_limits.Node("a", 64, 256000), slurm_limits.Node("b", 8, 32000),
               slurm_limits.Node("c", 8, 32000)))
    ok = {"nodes": 1, "cpus_per_node": 64, "memory": "200G", "time": "04:00:00",
          "extra_sbatch": []}
    slurm_limits.check_request(ok, part)
    with pytest.raises(slurm_limits.ConfigError, match=r"--nodes 2: only 1 node\(s\)"):
        slurm_limits.check_request({**ok, "nodes": 2}, part)
    capped = slurm_limits.Partition(**{**part.__dict__, "max_nodes": 1, "max_cpus_per_node": 32})
    with pytest.raises(slurm_limits.ConfigError, match=r"--nodes 2: .*MaxNodes"):
        slurm_limits.check_request({**ok, "nodes": 2, "cpus_per_node": 8}, capped)
    with pytest.raises(slurm_limits.ConfigError, match=r"--cpus-per-node 64: .*MaxCPUsPerNode"):
        slurm_limits.check_request(ok, capped)
