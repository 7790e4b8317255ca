"""Work counted from the Loop IR of the unfused (phase-2) Qwen2 program.

Spec §3 gives the unfused reference from an independent implementation:
62 kernel calls per block, 1,514 per decode step, 63 distinct kernels, and the
decode bytes polynomial
``18966*past*seq + 18966*seq*seq + 417792*past + 16357208*seq + 1976743344``.
Ours differs in exactly one place, per block: the new values leave the block
as a view (``split_heads`` permutes the v projection, and the reshape to
``[1, 2, seq, 64]`` for the ``values`` output is expressible by strides),
where the reference copies them. That is one kernel per block (61, not 62;
1,490 = 1,514 - 24 per step) and 2 x 512 bytes per token per block
(16,332,632 = 16,357,208 - 24 * 1,024 on the ``seq`` coefficient). Every other
coefficient, and the distinct-kernel count, match the reference exactly.
"""

from functools import cache

from nanocompile.analysis.work import WorkCount, count_work
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.synth import synthetic_config
from nanocompile.compiler import lower_to_loop
from nanocompile.ir.symbolic import parse_expr
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

CFG = Qwen2Config.from_dict(synthetic_config())


@cache
def work(layers: int, last_only: bool = True) -> WorkCount:
    graph = build_qwen2(CFG, Qwen2GraphOptions(n_layers=layers, last_only=last_only))
    return count_work(lower_to_loop(graph))


def test_kernel_calls_per_block_and_outside() -> None:
    per_block = work(2).launches - work(1).launches
    assert per_block == 61
    assert work(3).launches - work(2).launches == 61
    assert work(1).launches - per_block == 26  # embedding, RoPE tables, mask, final norm, head
    assert work(24).launches == 61 * 24 + 26 == 1490


def test_distinct_kernels_do_not_grow_with_layers() -> None:
    assert work(1).distinct_kernels == work(2).distinct_kernels == 63
    assert work(24).distinct_kernels == 63


def test_decode_bytes_polynomial() -> None:
    full = work(24).bytes_moved
    assert full == parse_expr(
        "18966*past*seq + 18966*seq*seq + 417792*past + 16332632*seq + 1976743344")
    reference = parse_expr(
        "18966*past*seq + 18966*seq*seq + 417792*past + 16357208*seq + 1976743344")
    assert reference - full == parse_expr("24576*seq")  # the values copy, see module doc


def test_constant_term_is_every_weight_once_plus_fixed_io() -> None:
    params = 494_032_768
    assert CFG.vocab_size * CFG.hidden_size + CFG.hidden_size + CFG.num_hidden_layers * (
        2 * CFG.hidden_size + 896 * 896 + 896 + 2 * (128 * 896 + 128) + 896 * 896
        + 3 * 4864 * 896) == params
    fixed_io = (
        CFG.vocab_size * 4      # the logits row written (last_only)
        + CFG.hidden_size * 4   # the last hidden row read by the LM head
    )
    # scalar constants read through stride-0 views: per block n and eps of two
    # rms_norms (16 B), the 0.125 score scale, sigmoid's 0 and 1 and 1 (16 B);
    # outside: inverse frequencies (128 B), mask 0/-inf (8 B), the final
    # norm's n and eps (8 B), two dim() values written and read (32 B)
    scalars = 24 * 32 + 128 + 8 + 8 + 32
    assert work(24).bytes_moved.const_value == params * 4 + fixed_io + scalars


def test_prefill_graph_reads_each_weight_once() -> None:
    w = work(24, last_only=False).bytes_moved
    assert w.coefficient("past") == 417792
    # with every position's logits, the head writes vocab*4 bytes per token
    assert w.coefficient("seq") - work(24).bytes_moved.coefficient("seq") == \
        CFG.vocab_size * 4 + CFG.hidden_size * 4
