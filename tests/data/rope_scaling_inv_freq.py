"""Writes tests/data/rope_scaling_inv_freq.csv: scaled RoPE frequencies (YaRN's, Llama 3.1's), the reference
test_kernels checks px_rope_inv_freq against. Transcriptions, in float64 (Python's math, no torch), of other
projects' code:

- gpt-oss: openai/gpt-oss, gpt_oss/torch/model.py, RotaryEmbedding._compute_concentration_and_inv_freq (the ramp's
  ends not rounded; d_half = head_dim / 2, low and high in pair indices, mask = 1 - clamp((arange(d_half) - low) /
  (high - low), 0, 1)), at the model's config: head_dim 64, rope_theta 150000, factor 32, initial context 4096,
  ntk_alpha 1, ntk_beta 32.
- deepseek-v3: huggingface/transformers, src/transformers/modeling_rope_utils.py, _compute_yarn_parameters
  (find_correction_range with math.floor / math.ceil, clamped to [0, dim - 1]; linear_ramp_factor over dim // 2), at
  DeepSeek-V3's rope_scaling: qk_rope_head_dim 64, rope_theta 10000, factor 40, original_max_position_embeddings 4096,
  beta_fast 32, beta_slow 1.
- llama3.1-8b and llama3.2-1b: meta-llama/llama-models, models/llama3/reference_impl/model.py, apply_scaling (by
  wavelength: under 8192 / high_freq_factor kept, over 8192 / low_freq_factor divided by the factor, a smooth blend
  between), at the configs' rope_scaling: Llama 3.1 8B head_dim 128, rope_theta 500000, factor 8; Llama 3.2 1B
  head_dim 64, rope_theta 500000, factor 32; both low_freq_factor 1, high_freq_factor 4, 8192 positions.

Run: python3 tests/data/rope_scaling_inv_freq.py > tests/data/rope_scaling_inv_freq.csv
"""
import math


def gpt_oss(head_dim, base, factor, context, alpha, beta):
    d_half = head_dim / 2
    low = d_half * math.log(context / (beta * 2 * math.pi)) / math.log(base)
    high = d_half * math.log(context / (alpha * 2 * math.pi)) / math.log(base)
    out = []
    for i in range(head_dim // 2):
        freq = base ** (2 * i / head_dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        mask = 1 - ramp
        out.append(1.0 / (factor * freq) * (1 - mask) + 1.0 / freq * mask)
    return out


def llama_models(head_dim, theta, scale_factor, low_freq_factor, high_freq_factor, old_context_len):
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    out = []
    for i in range(head_dim // 2):
        freq = 1.0 / (theta ** (2 * i / head_dim))
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            out.append(freq)
        elif wavelen > low_freq_wavelen:
            out.append(freq / scale_factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append((1 - smooth) * freq / scale_factor + smooth * freq)
    return out


def transformers_yarn(dim, base, factor, original, beta_fast, beta_slow):
    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(dim // 2):
        pos_freq = base ** (2 * i / dim)
        extrapolation_factor = 1 - min(max((i - low) / (high - low), 0.0), 1.0)
        out.append(1.0 / (factor * pos_freq) * (1 - extrapolation_factor) + 1.0 / pos_freq * extrapolation_factor)
    return out


print("# scaled RoPE frequencies (radians a position) of pair i; written by rope_scaling_inv_freq.py,")
print("# whose docstring names the implementations transcribed and the settings")
print("case,i,inv_freq")
for i, f in enumerate(gpt_oss(64, 150000.0, 32.0, 4096, 1.0, 32.0)):
    print(f"gpt-oss,{i},{f:.17g}")
for i, f in enumerate(transformers_yarn(64, 10000.0, 40.0, 4096, 32.0, 1.0)):
    print(f"deepseek-v3,{i},{f:.17g}")
for i, f in enumerate(llama_models(128, 500000.0, 8.0, 1.0, 4.0, 8192)):
    print(f"llama3.1-8b,{i},{f:.17g}")
for i, f in enumerate(llama_models(64, 500000.0, 32.0, 1.0, 4.0, 8192)):
    print(f"llama3.2-1b,{i},{f:.17g}")
