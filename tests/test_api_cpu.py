"""The Python surface on CPU tensors (runs in CI without a GPU): torch's semantics, errors, the
module, convert, autograd plumbing, opcheck and torch.compile."""
import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import convkit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rand(*shape, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(stride=3, padding=0, dilation=4),
    dict(stride=(2,), padding=(3,), dilation=(1,)),
    dict(padding="same", dilation=2),
    dict(padding="valid", stride=2),
    dict(groups=2, padding=1),
])
def test_conv1d_matches_torch_on_cpu(kwargs):
    x, w, b = rand(2, 4, 31), rand(6, 4 // kwargs.get("groups", 1), 3), rand(6)
    torch.testing.assert_close(convkit.conv1d(x, w, b, **kwargs), F.conv1d(x, w, b, **kwargs))


def test_same_padding_with_even_kernel_puts_extra_on_the_right():
    x, w = rand(1, 2, 20), rand(3, 2, 4)
    torch.testing.assert_close(convkit.conv1d(x, w, padding="same"), F.conv1d(x, w, padding="same"))


def test_causal_padding_matches_left_pad_then_slice():
    x, w = rand(2, 3, 25), rand(5, 3, 4)
    expect = F.conv1d(F.pad(x, (2 * 3, 0)), w, dilation=2)
    got = convkit.conv1d(x, w, padding="causal", dilation=2)
    assert got.shape[-1] == x.shape[-1]
    torch.testing.assert_close(got, expect)


def test_unbatched_input_like_torch():
    x, w = rand(4, 30), rand(6, 4, 3)
    torch.testing.assert_close(convkit.conv1d(x, w, padding=1), F.conv1d(x, w, padding=1))


def test_empty_batch():
    y = convkit.conv1d(rand(0, 4, 30), rand(6, 4, 3))
    assert y.shape == (0, 6, 28)


def test_gradients_flow_on_cpu():
    x, w, b = (rand(2, 4, 17).requires_grad_(), rand(6, 2, 3).requires_grad_(), rand(6).requires_grad_())
    assert torch.autograd.gradcheck(lambda x, w, b: convkit.conv1d(x, w, b, stride=2, padding="causal", groups=2,
                                                                   dilation=2), (x, w, b))


def test_only_requested_grads_are_computed():
    x, w, b = rand(2, 4, 17), rand(6, 4, 3).requires_grad_(), rand(6)
    convkit.conv1d(x, w, b).sum().backward()
    assert w.grad is not None and x.grad is None and b.grad is None


# (call, torch's wording we expect in the message)
BAD_CALLS = [
    ("ndim", lambda: convkit.conv1d(rand(2, 4, 10, 1), rand(6, 4, 3)), "Expected 2D"),
    ("weight_ndim", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4)), "weight must be 3-D"),
    ("channels", lambda: convkit.conv1d(rand(2, 5, 10), rand(6, 4, 3)), "to have 4 channels, but got 5"),
    ("groups_divide", lambda: convkit.conv1d(rand(2, 4, 10), rand(5, 2, 3), groups=2), "divisible by 2"),
    ("groups_channels", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 2, 3), groups=3), "channels"),
    ("groups_0", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), groups=0), "non-positive groups"),
    ("stride_0", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), stride=0), "non-positive stride"),
    ("dilation_0", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), dilation=0), "non-positive dilation"),
    ("negative_padding", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), padding=-1), "negative padding"),
    ("zero_length", lambda: convkit.conv1d(rand(2, 4, 0), rand(6, 4, 3), padding=2), "Only zero batch"),
    ("too_short", lambda: convkit.conv1d(rand(2, 4, 2), rand(6, 4, 3)), "Kernel size can't be greater"),
    ("weight_dtype", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3, dtype=torch.float32)),
     "should be the same"),
    ("bias_dtype", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), rand(6, dtype=torch.float32)),
     "bias type"),
    ("fp16_weight_fp32_input", lambda: convkit.conv1d(rand(2, 4, 10, dtype=torch.float32),
                                                      rand(6, 4, 3, dtype=torch.float16)), "should be the same"),
    ("bias_shape", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), rand(5)), "expected bias"),
    ("same_strided", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), padding="same", stride=2),
     "not supported for strided"),
    ("bad_padding_string", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), padding="full"),
     "Invalid padding string"),
    ("two_tuple_stride", lambda: convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), stride=(1, 1)), "list of 1"),
]


@pytest.mark.parametrize("call,words", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_raise_runtime_error_like_torch(call, words):
    with pytest.raises(RuntimeError, match=words):
        call()


def test_non_integer_stride_is_a_type_error():
    with pytest.raises(TypeError):
        convkit.conv1d(rand(2, 4, 10), rand(6, 4, 3), stride=1.5)


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [0, 2, "same", "valid"])
def test_module_matches_nn_conv1d(padding_mode, padding):
    torch.manual_seed(0)
    ref = nn.Conv1d(4, 6, 3, padding=padding, dilation=2, groups=2, padding_mode=padding_mode, dtype=torch.float64)
    mine = convkit.Conv1d(4, 6, 3, padding=padding, dilation=2, groups=2, padding_mode=padding_mode,
                          dtype=torch.float64)
    mine.load_state_dict(ref.state_dict())
    x = rand(2, 4, 23)
    torch.testing.assert_close(mine(x), ref(x))
    assert set(mine.state_dict()) == {"weight", "bias"}
    ref.load_state_dict(mine.state_dict())  # and back


def test_module_init_matches_nn_conv1d():
    torch.manual_seed(3)
    ref = nn.Conv1d(8, 16, 5, bias=True)
    torch.manual_seed(3)
    mine = convkit.Conv1d(8, 16, 5, bias=True)
    torch.testing.assert_close(mine.weight, ref.weight)
    torch.testing.assert_close(mine.bias, ref.bias)
    assert isinstance(mine, nn.Conv1d)


def test_module_factory_kwargs():
    m = convkit.Conv1d(2, 3, 3, device="cpu", dtype=torch.float64, bias=False)
    assert m.weight.dtype == torch.float64 and m.bias is None


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_module_causal_padding(padding_mode):
    m = convkit.Conv1d(3, 4, 4, padding="causal", dilation=2, padding_mode=padding_mode, dtype=torch.float64)
    x = rand(2, 3, 20)
    mode = "constant" if padding_mode == "zeros" else padding_mode
    expect = F.conv1d(F.pad(x, (6, 0), mode=mode), m.weight, m.bias, dilation=2)
    torch.testing.assert_close(m(x), expect)
    assert "padding=causal" in repr(m)


def test_convert_swaps_every_conv1d_in_place_keeping_weights():
    model = nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.ReLU(),
                          nn.Sequential(nn.Conv1d(8, 8, 5, groups=8, padding=2, dtype=torch.float64)),
                          nn.Linear(3, 3))
    before = copy.deepcopy(model)
    first, weight = model[0], model[0].weight
    out = convkit.convert(model)
    assert out is model and model[0] is first and model[0].weight is weight
    assert type(model[0]) is convkit.Conv1d and type(model[2][0]) is convkit.Conv1d
    assert type(model[3]) is nn.Linear
    assert model[2][0].weight.dtype == torch.float64
    x = torch.randn(2, 4, 16)
    torch.testing.assert_close(model[0](x), before[0](x))
    root = convkit.convert(nn.Conv1d(2, 2, 3))
    assert type(root) is convkit.Conv1d


@pytest.mark.parametrize("activation", ["relu", "silu", "gelu"])
def test_fused_activation_matches_unfused_torch_on_cpu(activation):
    x, w, b = rand(2, 4, 19).requires_grad_(), rand(4, 1, 4).requires_grad_(), rand(4).requires_grad_()
    f = lambda x, w, b: convkit.conv1d(x, w, b, padding="causal", groups=4, activation=activation)  # noqa: E731
    act = getattr(F, activation)
    torch.testing.assert_close(f(x, w, b), act(F.conv1d(F.pad(x, (3, 0)), w, b, groups=4)))
    assert torch.autograd.gradcheck(f, (x, w, b))


def test_fp32_weights_with_bfloat16_input_on_cpu():
    x = torch.randn(2, 4, 20).to(torch.bfloat16).requires_grad_()
    w, b = torch.randn(4, 1, 3, requires_grad=True), torch.randn(4, requires_grad=True)
    y = convkit.conv1d(x, w, b, padding=1, groups=4)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, F.conv1d(x.float(), w, b, padding=1, groups=4).to(torch.bfloat16))
    y.float().sum().backward()
    assert w.grad.dtype == torch.float32 and x.grad.dtype == torch.bfloat16 and b.grad.dtype == torch.float32


def test_unknown_activation_is_a_value_error():
    with pytest.raises(ValueError, match="activation"):
        convkit.conv1d(rand(1, 2, 9), rand(2, 2, 3), activation="tanh")


def test_explain_on_cpu():
    assert convkit.explain(rand(1, 2, 9), rand(2, 2, 3))["forward"] == "torch (CPU)"


def run_opchecks(device):
    f32 = dict(dtype=torch.float32, device=device)
    x, w, b = torch.randn(2, 4, 20, **f32), torch.randn(6, 2, 3, **f32), torch.randn(6, **f32)
    dy = torch.randn(2, 6, 11, **f32)
    for act in (0, 2):
        torch.library.opcheck(torch.ops.convkit.conv1d_forward.default, (x, w, b, 2, 1, 2, 1, 2, act))
        torch.library.opcheck(torch.ops.convkit.conv1d_backward.default,
                              (dy, x, w, b, 2, 1, 2, 1, 2, act, True, True, True))
    torch.library.opcheck(torch.ops.convkit.conv1d_backward.default,
                          (dy, x, w, None, 2, 1, 2, 1, 2, 0, False, True, False))


def test_opcheck_forward_and_backward_ops():
    run_opchecks("cpu")


def test_compile_fullgraph_forward_and_backward_on_cpu():
    torch._dynamo.reset()
    m = convkit.Conv1d(4, 8, 3, padding="same", dilation=2)
    x = torch.randn(2, 4, 33, requires_grad=True)
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    y = compiled(x)
    y.square().sum().backward()
    gx = x.grad.clone()
    x.grad = None
    m(x).square().sum().backward()
    torch.testing.assert_close(gx, x.grad)


def test_compile_with_inductor_on_cpu():
    torch._dynamo.reset()
    f = torch.compile(lambda x, w: torch.relu(convkit.conv1d(x, w, padding="causal")), fullgraph=True)
    x, w = torch.randn(2, 3, 17), torch.randn(5, 3, 4)
    torch.testing.assert_close(f(x, w), torch.relu(F.conv1d(F.pad(x, (3, 0)), w)))


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "csrc")), reason="tests run outside the source tree")
def test_generated_kernel_files_are_up_to_date():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "csrc", "generate_kernels.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cuda_built_reports_a_bool():
    assert isinstance(convkit.cuda_built(), bool)
