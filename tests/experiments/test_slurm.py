import pytest

pytestmark = pytest.mark.slurm


def test_slurm_cluster_smoke(slurm_cluster):
    out = slurm_cluster.run("sinfo", "-h", "-o", "%P %T")
    assert "a100*" in out
