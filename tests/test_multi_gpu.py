"""Several GPUs: convkit on a device that is not the current one, and inside DistributedDataParallel.
Both tests need two GPUs and skip otherwise."""
import os
import socket

import pytest
import torch
import torch.nn as nn

import convkit

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two or more GPUs")]


def test_forward_backward_on_cuda1_while_cuda0_is_current():
    torch.manual_seed(0)
    x = torch.randn(4, 8, 300, device="cuda:1", dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, 1, 4, device="cuda:1", dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(6, 8, 3, device="cuda:1", dtype=torch.float64, requires_grad=True)
    torch.cuda.set_device(0)
    torch.cuda.synchronize(0)
    before = torch.cuda.memory_allocated(0)
    y = convkit.conv1d(convkit.conv1d(x, w, padding="causal", groups=8), w2, padding=2, dilation=2)
    y.square().sum().backward()
    assert y.device == torch.device("cuda:1") and x.grad.device == torch.device("cuda:1")
    assert torch.cuda.memory_allocated(0) == before  # nothing landed on cuda:0
    xr, wr, w2r = (t.detach().clone().requires_grad_() for t in (x, w, w2))
    f = torch.nn.functional
    yr = f.conv1d(f.conv1d(f.pad(xr, (3, 0)), wr, groups=8), w2r, padding=2, dilation=2)
    yr.square().sum().backward()
    torch.testing.assert_close(y, yr)
    for a, b in ((x, xr), (w, wr), (w2, w2r)):
        torch.testing.assert_close(a.grad, b.grad)


class TCN(nn.Module):
    """A small temporal-convolution model: dense, depthwise and dilated convolutions."""

    def __init__(self, conv=nn.Conv1d):
        super().__init__()
        self.net = nn.Sequential(conv(4, 16, 3, padding=1), nn.SiLU(), conv(16, 16, 4, groups=16, padding=3),
                                 nn.SiLU(), conv(16, 8, 3, dilation=4, padding=4))

    def forward(self, x):
        return self.net(x)


def _ddp_worker(rank, world, port, results):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    torch.manual_seed(0)
    ref = TCN().cuda(rank).double()
    mine = convkit.convert(TCN()).cuda(rank).double()
    mine.load_state_dict(ref.state_dict())
    models = [DDP(ref, device_ids=[rank]), DDP(mine, device_ids=[rank])]
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    worst = 0.0
    for _ in range(5):
        x = torch.randn(3, 4, 200, generator=g, dtype=torch.float64).cuda(rank)
        for m, o in zip(models, opts):
            o.zero_grad()
            m(x).square().mean().backward()
            o.step()
        for p, q in zip(ref.parameters(), mine.parameters()):
            worst = max(worst, (p - q).abs().max().item())
    results[rank] = worst
    dist.destroy_process_group()


def test_ddp_training_matches_nn_conv1d():
    import torch.multiprocessing as mp

    os.environ["NCCL_NVLS_ENABLE"] = "0"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = 2
    results = mp.Manager().dict()
    mp.spawn(_ddp_worker, args=(world, port, results), nprocs=world, join=True)
    assert sorted(results.keys()) == [0, 1]
    assert max(results.values()) < 1e-10, dict(results)
