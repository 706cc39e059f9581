"""check_init / clip_init_ on real architectures built offline from transformers configs.

Each model is built from its config with the architecture's own init (``_init_weights``), at tiny
sizes; the expected counts come from numpy, over the same rule written out again: centre = lower
median, std = 1.4826 x lower median of |x - centre|, beyond = outside centre +- 3 std.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from gpuyield.errors import InputError  # noqa: E402
from gpuyield.guard import check_init, clip_init_  # noqa: E402

pytestmark = pytest.mark.train


def gpt2() -> torch.nn.Module:
    torch.manual_seed(1)
    config = transformers.GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=4,
        n_positions=128,
        vocab_size=1000,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config)


def llama() -> torch.nn.Module:
    torch.manual_seed(2)
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    return transformers.LlamaForCausalLM(config)


def expected(values: np.ndarray, sigma: float = 3.0) -> tuple[int, float]:
    """(values beyond, max |z|) counted with numpy; (0, 0.0) for a constant tensor."""
    flat = np.sort(values.astype(np.float64).reshape(-1))
    center = flat[(flat.size - 1) // 2]
    deviations = np.sort(np.abs(flat - center))
    std = 1.482602218505602 * deviations[(deviations.size - 1) // 2]
    if std == 0:
        return 0, 0.0
    beyond = int(np.count_nonzero(np.abs(flat - center) > sigma * std))
    return beyond, float(deviations[-1] / std)


def params(model: torch.nn.Module) -> dict[str, np.ndarray]:
    return {n: p.detach().numpy().copy() for n, p in model.named_parameters()}


@pytest.mark.parametrize("build", [gpt2, llama], ids=["gpt2", "llama"])
def test_check_init_finds_exactly_the_values_beyond_3_sigma(build) -> None:  # type: ignore[no-untyped-def]
    model = build()
    with torch.no_grad():
        # Outliers a broken init would leave: 12 values at 10 standard deviations of 0.02.
        first = next(p for n, p in model.named_parameters() if n.endswith("mlp.c_fc.weight")
                     or n.endswith("mlp.up_proj.weight"))  # fmt: skip
        first.view(-1)[:12] = 0.2
    report = check_init(model)
    values = params(model)
    assert [t.name for t in report.tensors] == list(values)
    for tensor in report.tensors:
        beyond, max_z = expected(values[tensor.name])
        assert tensor.beyond == beyond, tensor.name
        assert tensor.max_abs_z == pytest.approx(max_z, rel=1e-9), tensor.name
    # A normal init has outliers (about 0.27% beyond 3 sigma); norms and biases are constant.
    weights = [t for t in report.tensors if t.std_source == "robust"]
    assert weights and all(t.beyond > 0 for t in weights if t.numel >= 10_000)
    assert 0.001 < report.share_beyond < 0.006
    assert any(t.std_source == "constant" for t in report.tensors)
    assert report.max_abs_z > 9  # the planted 0.2 values
    assert report.worst(1)[0].max_abs_z == report.max_abs_z


@pytest.mark.parametrize("build", [gpt2, llama], ids=["gpt2", "llama"])
def test_clip_init_leaves_none_beyond_and_the_rest_untouched(build) -> None:  # type: ignore[no-untyped-def]
    model = build()
    before = params(model)
    clipped = clip_init_(model)
    after = params(model)
    assert clipped.beyond > 0
    assert check_init(model).beyond == 0
    for tensor in clipped.tensors:
        old, new = before[tensor.name], after[tensor.name]
        if tensor.std == 0:
            assert np.array_equal(old, new)
            continue
        high = tensor.center + 3 * tensor.std
        low = tensor.center - 3 * tensor.std
        outside = (old.astype(np.float64) > high) | (old.astype(np.float64) < low)
        assert int(outside.sum()) == tensor.beyond
        assert np.array_equal(old[~outside], new[~outside]), tensor.name
        # Clipped to the bound (to float32's resolution), never past it.
        assert np.all(np.abs(new[outside].astype(np.float64) - np.where(old[outside] > 0, high, low))
                      <= np.spacing(np.float32(high)))  # fmt: skip
        assert np.all((new.astype(np.float64) >= low) & (new.astype(np.float64) <= high))


def test_given_std_is_the_intended_distribution() -> None:
    model = llama()
    report = check_init(model, std=0.02)
    values = params(model)
    for tensor in report.tensors:
        assert tensor.std_source == "given" and tensor.center == 0.0
        assert tensor.beyond == int(np.count_nonzero(np.abs(values[tensor.name]) > 0.06))
    # Per name: one tensor given, the rest estimated.
    name = "model.embed_tokens.weight"
    mixed = check_init(model, std={name: 0.01})
    sources = {t.name: t.std_source for t in mixed.tensors}
    assert sources[name] == "given" and sources["lm_head.weight"] == "robust"


def test_bad_sigma_and_std_are_input_errors() -> None:
    model = gpt2()
    with pytest.raises(InputError, match="sigma"):
        check_init(model, sigma=0)
    with pytest.raises(InputError, match="std for"):
        check_init(model, std=-1.0)


def test_importing_the_guard_does_not_load_torch() -> None:
    code = "import sys, gpuyield.guard; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_without_torch_the_init_check_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from gpuyield.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.delitem(sys.modules, "gpuyield.guard.init", raising=False)
    with pytest.raises(MissingExtraError) as caught:
        importlib.import_module("gpuyield.guard.init")
    assert caught.value.hint == "pip install 'gpuyield[train]'"
