"""Write library models that the real-model suite does not hold as KernelBench-format problems.

The suite (benchmarks/real_models/) holds 26 models, tested in CI. This zoo is for measuring the
builtin coder on models it was not tuned on: 32 Hugging Face transformers text configs (decoders
with rotary, ALiBi, multi-query and sliding-window attention, soft-capping, mixtures of experts, a
state-space model; encoders; an encoder-decoder), 9 transformers image and audio models (ViT,
CLIP, DINOv2, SegFormer, Swin, ConvNeXt, ResNet, Wav2Vec2, Whisper's encoder), 30 timm and 16
torchvision models, each a `Model` with random weights from the library's own constructor, sized
and typed by the suite's STITCH_MODEL_SIZE and STITCH_MODEL_DTYPE (small: a CPU-sized config and
one example; full: the same config, 8 examples or 512 tokens).

`--set third` holds 75 models written after the first two sets had been worked on (session 12,
2026-12-07): 26 transformers text configs (mixture-of-experts, hybrid state-space and recurrent
decoders, sparse, long-context and Fourier encoders, encoder-decoders), 20 image and audio models,
17 timm and 12 torchvision models, among them video, segmentation and optical-flow models.
`--set fourth` holds 63 more (session 14): 29 transformers text configs (2025's decoders, latent
and differential attention, hybrids, mixtures of experts, classic encoders, encoder-decoders),
13 image and audio models, 15 timm and 6 torchvision models.

    python benchmarks/model_zoo.py /tmp/zoo
    python benchmarks/capture_fidelity.py /tmp/zoo --dtype bfloat16 --json zoo-bf16.json

Needs the `models` extra (torchvision, timm, transformers).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

COMMON = Path(__file__).resolve().with_name("real_models") / "_common.py"

TAIL = """

def get_init_inputs():
    return _common().init_inputs()


def _common():
    import importlib.util
    import sys

    name = "stitch_real_models_common"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, {common!r})
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]
"""

# name: (config class, model class, config overrides, the output's attribute)
HF: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16}, "logits"),
    "gemma2": (
        "Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16, "sliding_window": 8}, "logits",
    ),
    "gemma3": (
        "Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": 16, "sliding_window": 8}, "logits",
    ),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}, "logits"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0}, "logits"),
    "opt": ("OPTConfig", "OPTForCausalLM", {"ffn_dim": 128, "word_embed_proj_dim": 64}, "logits"),
    "gptneox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {}, "logits"),
    "falcon": ("FalconConfig", "FalconForCausalLM", {}, "logits"),
    "bloom": ("BloomConfig", "BloomForCausalLM", {}, "logits"),
    "roberta": ("RobertaConfig", "RobertaModel", {"pad_token_id": 1}, "last_hidden_state"),
    "distilbert": (
        "DistilBertConfig", "DistilBertModel",
        {"dim": 64, "hidden_dim": 128, "n_layers": 2, "n_heads": 4}, "last_hidden_state",
    ),
    "albert": ("AlbertConfig", "AlbertModel", {"embedding_size": 32}, "last_hidden_state"),
    "electra": ("ElectraConfig", "ElectraModel", {"embedding_size": 32}, "last_hidden_state"),
    "gptj": (
        "GPTJConfig", "GPTJForCausalLM",
        {"n_embd": 64, "n_layer": 2, "n_head": 4, "rotary_dim": 8, "n_positions": 1024}, "logits",
    ),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {}, "logits"),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", {"sliding_window": None}, "logits"),
    "gptbigcode": (
        "GPTBigCodeConfig", "GPTBigCodeForCausalLM",
        {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 1024}, "logits",
    ),
    "codegen": (
        "CodeGenConfig", "CodeGenForCausalLM",
        {"n_embd": 64, "n_layer": 2, "n_head": 4, "rotary_dim": 8, "n_positions": 1024,
         "n_ctx": 1024}, "logits",
    ),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}, "logits"),
    "granite": ("GraniteConfig", "GraniteForCausalLM", {}, "logits"),
    "llama_tied": (
        "LlamaConfig", "LlamaForCausalLM",
        {"tie_word_embeddings": True, "num_key_value_heads": 1}, "logits",
    ),
    "mistral_mqa": (
        "MistralConfig", "MistralForCausalLM",
        {"num_key_value_heads": 1, "sliding_window": None}, "logits",
    ),
    "gpt2_gelu": (
        "GPT2Config", "GPT2LMHeadModel",
        {"n_embd": 64, "n_layer": 3, "n_head": 8, "n_positions": 1024,
         "activation_function": "gelu"}, "logits",
    ),
    "bert_mlm": ("BertConfig", "BertForMaskedLM", {}, "logits"),
    "modernbert": (
        "ModernBertConfig", "ModernBertModel",
        {"global_attn_every_n_layers": 2, "local_attention": 8, "pad_token_id": 0,
         "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 3, "sep_token_id": 4},
        "last_hidden_state",
    ),
    "debertav2": ("DebertaV2Config", "DebertaV2Model", {}, "last_hidden_state"),
    "bart": (
        "BartConfig", "BartModel",
        {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128},
        "last_hidden_state",
    ),
    "mamba": ("MambaConfig", "MambaForCausalLM", {"state_size": 8}, "logits"),
    "llama3_rope_scaling": (
        "LlamaConfig", "LlamaForCausalLM",
        {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
        "logits",
    ),
    "gemma2_softcap": (
        "Gemma2Config", "Gemma2ForCausalLM",
        {"head_dim": 16, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0},
        "logits",
    ),
    "mixtral": (
        "MixtralConfig", "MixtralForCausalLM",
        {"num_local_experts": 4, "num_experts_per_tok": 2}, "logits",
    ),
    "qwen2moe": (
        "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
        {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
         "shared_expert_intermediate_size": 64}, "logits",
    ),
}  # fmt: skip
# Encoder-decoders: the decoder reads the same tokens.
SEQ2SEQ = ("BartModel",)
# What every config not spelled in GPT-2's names gets first (small: width 64, 2 layers).
HF_BASE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,  # the full size reads 512 tokens
    "vocab_size": 512,
}
# Configs that refuse some of HF_BASE's names (GPT-2's, or their own) get only its vocabulary.
GPT2_NAMED = ("GPTJ", "GPTBigCode", "CodeGen", "GPT2", "DistilBert", "Funnel", "XLNet",
              "OpenAIGPT", "XLMModel", "Dbrx")  # fmt: skip

# transformers models that read images or sound: name -> (config, model class, config
# overrides, the input's keyword, the output's attribute, one example's shape at small size;
# full size: 8 examples of the same shape).
HF_MEDIA: dict[str, tuple[str, str, dict[str, Any], str, str, tuple[int, ...]]] = {
    "vit": (
        "ViTConfig", "ViTModel",
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "image_size": 224, "patch_size": 16},
        "pixel_values", "last_hidden_state", (3, 224, 224),
    ),
    "clip_vision": (
        "CLIPVisionConfig", "CLIPVisionModel",
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "image_size": 224, "patch_size": 32},
        "pixel_values", "pooler_output", (3, 224, 224),
    ),
    "dinov2": (
        "Dinov2Config", "Dinov2Model",
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "image_size": 224, "patch_size": 14},
        "pixel_values", "last_hidden_state", (3, 224, 224),
    ),
    "segformer": (
        "SegformerConfig", "SegformerModel",
        {"num_encoder_blocks": 2, "depths": [1, 1], "sr_ratios": [2, 1],
         "hidden_sizes": [16, 32], "num_attention_heads": [1, 2], "strides": [4, 2],
         "patch_sizes": [7, 3]},
        "pixel_values", "last_hidden_state", (3, 128, 128),
    ),
    "swin": (
        "SwinConfig", "SwinModel",
        {"image_size": 224, "patch_size": 4, "embed_dim": 16, "depths": [1, 1],
         "num_heads": [1, 2], "window_size": 7},
        "pixel_values", "last_hidden_state", (3, 224, 224),
    ),
    "convnext": (
        "ConvNextConfig", "ConvNextModel", {"hidden_sizes": [16, 32], "depths": [1, 1],
                                            "num_stages": 2},
        "pixel_values", "pooler_output", (3, 224, 224),
    ),
    "resnet": (
        "ResNetConfig", "ResNetModel", {"embedding_size": 16, "hidden_sizes": [16, 32],
                                        "depths": [1, 1]},
        "pixel_values", "pooler_output", (3, 224, 224),
    ),
    "wav2vec2": (
        "Wav2Vec2Config", "Wav2Vec2Model",
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "conv_dim": (32, 32, 32), "conv_stride": (5, 2, 2),
         "conv_kernel": (10, 3, 3), "num_conv_pos_embeddings": 16,
         "num_conv_pos_embedding_groups": 4},
        "input_values", "last_hidden_state", (16000,),
    ),
    "whisper_encoder": (
        "WhisperConfig", "WhisperModel.get_encoder",
        {"d_model": 64, "encoder_layers": 2, "encoder_attention_heads": 4,
         "encoder_ffn_dim": 128, "decoder_attention_heads": 4, "decoder_ffn_dim": 128,
         "num_mel_bins": 16, "max_source_positions": 100},
        "input_features", "last_hidden_state", (16, 200),
    ),
}  # fmt: skip

TIMM = [
    "deit_tiny_patch16_224", "swin_tiny_patch4_window7_224", "resnext26ts", "densenet121",
    "mixer_s16_224", "efficientnetv2_rw_t", "ghostnet_100", "levit_128s", "poolformer_s12",
    "edgenext_xx_small", "regnetx_002", "repvgg_a0", "cspresnet50", "dla34", "mobilevitv2_050",
    "fastvit_t8", "tiny_vit_5m_224", "caformer_s18", "nf_resnet26", "xception41", "inception_v3",
    "convnextv2_atto", "hgnetv2_b0", "rexnet_100", "mobilenetv4_conv_small", "efficientformer_l1",
    "coat_lite_tiny", "pvt_v2_b0", "maxvit_nano_rw_256", "eva02_tiny_patch14_224",
]  # fmt: skip
TORCHVISION = [
    "alexnet", "vgg11_bn", "googlenet", "inception_v3", "mnasnet0_5", "wide_resnet50_2",
    "resnext50_32x4d", "maxvit_t", "swin_v2_t", "efficientnet_v2_s", "regnet_x_400mf",
    "mobilenet_v2", "shufflenet_v2_x0_5", "resnet101", "mobilenet_v3_large", "vit_b_32",
]  # fmt: skip


def _hf_source(
    cls: str, config: str, kwargs: dict[str, Any], build: str, arg: str, call: str, inputs: str
) -> str:
    """A transformers model from its config class, random weights; `forward(arg)` returns `call`."""
    no_cache = "        config.use_cache = False\n" if arg == "input_ids" else ""
    return f'''"""transformers {cls} from {config}(**{kwargs!r}), random weights."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, size, dtype):
        super().__init__()
        import transformers

        torch.manual_seed(0)
        config = transformers.{config}(**{kwargs!r})
{no_cache}        self.net = {build}
        self.to(getattr(torch, dtype)).eval()

    def forward(self, {arg}):
        return {call}


def get_inputs():
{inputs}
'''


def hf_problem(config: str, cls: str, overrides: dict[str, Any], output: str) -> str:
    kwargs = {"vocab_size": 512} if cls.startswith(GPT2_NAMED) else dict(HF_BASE)
    kwargs.update(overrides)
    decoder = (
        ", decoder_input_ids=input_ids"
        if cls in SEQ2SEQ + SEQ2SEQ_MORE + SEQ2SEQ_THIRD + SEQ2SEQ_FOURTH
        else ""
    )
    call = f"self.net(input_ids=input_ids{decoder}).{output}"
    inputs = "    return _common().tokens(512, small=(2, 16), full=(1, 512))"
    return _hf_source(cls, config, kwargs, f"transformers.{cls}(config)", "input_ids", call, inputs)


def hf_media_problem(
    config: str,
    cls: str,
    overrides: dict[str, Any],
    arg: str,
    output: str,
    shape: tuple[int, ...],
) -> str:
    build = (
        f"transformers.{cls.split('.')[0]}(config).get_encoder()"
        if cls.endswith(".get_encoder")
        else f"transformers.{cls}(config)"
    )
    inputs = (
        f"    c = _common()\n    return [torch.randn(c.pick(1, 8), *{shape!r}, dtype=c.dtype())]"
    )
    return _hf_source(cls, config, overrides, build, "x", f"self.net({arg}=x).{output}", inputs)


def timm_problem(name: str) -> str:
    return f'''"""timm {name}, random weights, 10 classes."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, size, dtype):
        super().__init__()
        import timm

        torch.manual_seed(0)
        self.net = timm.create_model({name!r}, pretrained=False, num_classes=10)
        self.to(getattr(torch, dtype)).eval()

    def forward(self, x):
        return self.net(x)


def get_inputs():
    import timm

    res = timm.get_pretrained_cfg({name!r}).input_size[-1]
    return _common().images(small=(1, res), full=(8, res))
'''


def torchvision_problem(name: str) -> str:
    res = 299 if name == "inception_v3" else 224
    extra = (
        ", aux_logits=False, init_weights=False" if name in ("googlenet", "inception_v3") else ""
    )
    return f'''"""torchvision {name}, random weights, 10 classes."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, size, dtype):
        super().__init__()
        import torchvision

        torch.manual_seed(0)
        self.net = torchvision.models.{name}(num_classes=10{extra})
        self.to(getattr(torch, dtype)).eval()

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return _common().images(small=(1, {res}), full=(8, {res}))
'''


# A second set (`--set more`), written after the first had been worked on: models no change was
# made for, to see what an unseen model meets.
HF_MORE: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "xlm_roberta": (
        "XLMRobertaConfig", "XLMRobertaModel", {"pad_token_id": 1}, "last_hidden_state",
    ),
    "mpnet": ("MPNetConfig", "MPNetModel", {"pad_token_id": 1}, "last_hidden_state"),
    "gpt_neo": (
        "GPTNeoConfig", "GPTNeoForCausalLM",
        {"num_layers": 2, "num_heads": 4, "attention_types": [[["global", "local"], 1]],
         "window_size": 8}, "logits",
    ),
    "mpt": (
        "MptConfig", "MptForCausalLM",
        {"d_model": 64, "n_heads": 4, "n_layers": 2, "expansion_ratio": 2, "max_seq_len": 1024},
        "logits",
    ),
    "persimmon": ("PersimmonConfig", "PersimmonForCausalLM", {}, "logits"),
    "cohere": ("CohereConfig", "CohereForCausalLM", {}, "logits"),
    "nemotron": ("NemotronConfig", "NemotronForCausalLM", {"head_dim": 16}, "logits"),
    "helium": ("HeliumConfig", "HeliumForCausalLM", {"head_dim": 16}, "logits"),
    "glm": ("GlmConfig", "GlmForCausalLM", {"head_dim": 16, "pad_token_id": 0}, "logits"),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {}, "logits"),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {"pad_token_id": 0}, "logits"),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", {"head_dim": 16}, "logits"),
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", {}, "logits"),
    "xglm": (
        "XGLMConfig", "XGLMForCausalLM",
        {"d_model": 64, "num_layers": 2, "attention_heads": 4, "ffn_dim": 128}, "logits",
    ),
    "ernie": ("ErnieConfig", "ErnieModel", {}, "last_hidden_state"),
    "roformer": ("RoFormerConfig", "RoFormerModel", {"embedding_size": 64}, "last_hidden_state"),
    "squeezebert": (
        "SqueezeBertConfig", "SqueezeBertModel", {"embedding_size": 64}, "last_hidden_state",
    ),
    "t5": (
        "T5Config", "T5Model",
        {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4},
        "last_hidden_state",
    ),
    "pegasus": (
        "PegasusConfig", "PegasusModel",
        {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128},
        "last_hidden_state",
    ),
}  # fmt: skip
SEQ2SEQ_MORE = ("T5Model", "PegasusModel")
HF_MEDIA_MORE: dict[str, tuple[str, str, dict[str, Any], str, str, tuple[int, ...]]] = {
    "deit": (
        "DeiTConfig", "DeiTModel",
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128},
        "pixel_values", "last_hidden_state", (3, 224, 224),
    ),
    "beit": (
        "BeitConfig", "BeitModel",
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "use_relative_position_bias": True},
        "pixel_values", "last_hidden_state", (3, 224, 224),
    ),
    "mobilevit": (
        "MobileViTConfig", "MobileViTModel", {}, "pixel_values", "pooler_output", (3, 256, 256),
    ),
    "poolformer": (
        "PoolFormerConfig", "PoolFormerModel",
        {"depths": [1, 1, 1, 1], "hidden_sizes": [16, 32, 64, 128]},
        "pixel_values", "last_hidden_state", (3, 224, 224),
    ),
    "regnet": (
        "RegNetConfig", "RegNetModel", {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1],
                                        "groups_width": 8, "embedding_size": 16},
        "pixel_values", "pooler_output", (3, 224, 224),
    ),
    "convnextv2": (
        "ConvNextV2Config", "ConvNextV2Model", {"hidden_sizes": [16, 32], "depths": [1, 1],
                                                "num_stages": 2},
        "pixel_values", "pooler_output", (3, 224, 224),
    ),
}  # fmt: skip
TIMM_MORE = [
    "cait_xxs24_224", "resmlp_12_224", "gcvit_xxtiny", "hrnet_w18_small", "dpn68", "selecsls42b",
    "ese_vovnet19b_dw", "regnetz_b16", "mobileone_s0", "inception_next_tiny", "efficientvit_b0",
    "lcnet_050", "tinynet_a", "visformer_tiny", "crossvit_tiny_240", "twins_svt_small",
    "convit_tiny", "xcit_nano_12_p16_224", "seresnet18", "skresnet18", "res2net50_14w_8s",
    "halonet26t", "botnet26t_256", "efficientnet_lite0", "ghostnetv2_100", "fbnetv3_b",
    "starnet_s1", "mambaout_femto", "vit_little_patch16_reg4_gap_256", "sequencer2d_s",
]  # fmt: skip
TORCHVISION_MORE = [
    "squeezenet1_0", "mnasnet1_0", "efficientnet_b3", "convnext_small", "swin_s",
    "regnet_y_800mf", "resnet34", "densenet161", "shufflenet_v2_x2_0", "vgg13",
]  # fmt: skip


# A third set (`--set third`), written after the first two had been worked on (session 12,
# 2026-12-07): again models no change was made for.
HF_THIRD: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "olmoe": (
        "OlmoeConfig", "OlmoeForCausalLM", {"num_experts": 4, "num_experts_per_tok": 2}, "logits",
    ),
    "qwen3moe": (
        "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
        {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
         "head_dim": 16}, "logits",
    ),
    "phimoe": (
        "PhimoeConfig", "PhimoeForCausalLM", {"num_local_experts": 4, "num_experts_per_tok": 2},
        "logits",
    ),
    "granitemoe": (
        "GraniteMoeConfig", "GraniteMoeForCausalLM",
        {"num_local_experts": 4, "num_experts_per_tok": 2}, "logits",
    ),
    "jamba": (
        "JambaConfig", "JambaForCausalLM",
        {"num_experts": 4, "num_experts_per_tok": 2, "mamba_d_state": 8, "mamba_d_conv": 4,
         "mamba_expand": 2, "attn_layer_period": 2, "attn_layer_offset": 1,
         "expert_layer_period": 2, "expert_layer_offset": 1, "use_mamba_kernels": False,
         "pad_token_id": 0}, "logits",
    ),
    "zamba2": (
        "Zamba2Config", "Zamba2ForCausalLM",
        {"mamba_d_state": 8, "mamba_headdim": 16, "mamba_ngroups": 1, "n_mamba_heads": 8,
         "num_hidden_layers": 2, "layers_block_type": ["linear_attention", "hybrid"],
         "attention_head_dim": 16, "num_mem_blocks": 1, "pad_token_id": 0,
         "use_mem_rope": True}, "logits",
    ),
    "cohere2": (
        "Cohere2Config", "Cohere2ForCausalLM",
        {"sliding_window": 8, "head_dim": 16, "pad_token_id": 0}, "logits",
    ),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", {"head_dim": 16, "pad_token_id": 0}, "logits"),
    "gpt_oss": (
        "GptOssConfig", "GptOssForCausalLM",
        {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 16, "sliding_window": 8,
         "pad_token_id": 0}, "logits",
    ),
    "deepseek_v3": (
        "DeepseekV3Config", "DeepseekV3ForCausalLM",
        {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
         "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
         "v_head_dim": 16, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
         "n_shared_experts": 1, "pad_token_id": 0}, "logits",
    ),
    "mamba2": (
        "Mamba2Config", "Mamba2ForCausalLM",
        {"num_heads": 8, "head_dim": 16, "state_size": 8, "n_groups": 1, "expand": 2,
         "chunk_size": 8, "pad_token_id": 0}, "logits",
    ),
    "falcon_mamba": (
        "FalconMambaConfig", "FalconMambaForCausalLM", {"state_size": 8, "pad_token_id": 0},
        "logits",
    ),
    "recurrentgemma": (
        "RecurrentGemmaConfig", "RecurrentGemmaForCausalLM",
        {"lru_width": 64, "attention_window_size": 8, "head_dim": 16, "num_hidden_layers": 3,
         "pad_token_id": 0}, "logits",
    ),
    "lfm2": (
        "Lfm2Config", "Lfm2ForCausalLM",
        {"pad_token_id": 0, "block_ff_dim": 128, "layer_types": ["conv", "full_attention"],
         "head_dim": 16}, "logits",
    ),
    "mobilebert": (
        "MobileBertConfig", "MobileBertModel",
        {"embedding_size": 32, "intra_bottleneck_size": 32, "true_hidden_size": 32,
         "num_feedforward_networks": 2, "pad_token_id": 0}, "last_hidden_state",
    ),
    "bigbird": (
        "BigBirdConfig", "BigBirdModel",
        {"pad_token_id": 0, "block_size": 2, "num_random_blocks": 1}, "last_hidden_state",
    ),
    "longformer": (
        "LongformerConfig", "LongformerModel", {"attention_window": 4, "pad_token_id": 1},
        "last_hidden_state",
    ),
    "deberta": ("DebertaConfig", "DebertaModel", {"pad_token_id": 0}, "last_hidden_state"),
    "esm": (
        "EsmConfig", "EsmModel",
        {"pad_token_id": 1, "mask_token_id": 2, "position_embedding_type": "rotary"},
        "last_hidden_state",
    ),
    "nystromformer": (
        "NystromformerConfig", "NystromformerModel",
        {"num_landmarks": 4, "segment_means_seq_len": 16, "pad_token_id": 0},
        "last_hidden_state",
    ),
    "fnet": (
        "FNetConfig", "FNetModel", {"pad_token_id": 0, "use_tpu_fourier_optimizations": False},
        "last_hidden_state",
    ),
    "marian": (
        "MarianConfig", "MarianModel",
        {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
         "pad_token_id": 0, "decoder_start_token_id": 0},
        "last_hidden_state",
    ),
    "switch_transformers": (
        "SwitchTransformersConfig", "SwitchTransformersModel",
        {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
         "num_heads": 4, "num_experts": 4, "num_sparse_encoder_layers": 1,
         "num_sparse_decoder_layers": 1, "pad_token_id": 0, "decoder_start_token_id": 0},
        "last_hidden_state",
    ),
    "longt5": (
        "LongT5Config", "LongT5Model",
        {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4,
         "local_radius": 4, "encoder_attention_type": "transient-global",
         "global_block_size": 4, "pad_token_id": 0, "decoder_start_token_id": 0},
        "last_hidden_state",
    ),
    "funnel": (
        "FunnelConfig", "FunnelModel",
        {"d_model": 64, "n_head": 4, "d_head": 16, "d_inner": 128, "block_sizes": [1, 1],
         "pad_token_id": 0}, "last_hidden_state",
    ),
    "xlnet": (
        "XLNetConfig", "XLNetModel",
        {"d_model": 64, "n_layer": 2, "n_head": 4, "d_inner": 128, "pad_token_id": 0},
        "last_hidden_state",
    ),
}  # fmt: skip
SEQ2SEQ_THIRD = ("MarianModel", "SwitchTransformersModel", "LongT5Model")
# The small ViT and Wav2Vec2 configs of HF_MEDIA, which most entries below start from.
_VIT = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 128}  # fmt: skip
_W2V = _VIT | {"conv_dim": (32, 32, 32), "conv_stride": (5, 2, 2), "conv_kernel": (10, 3, 3),
               "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4}  # fmt: skip
_IMG = (3, 224, 224)
_WAV = (16000,)
HF_MEDIA_THIRD: dict[str, tuple[str, str, dict[str, Any], str, str, tuple[int, ...]]] = {
    "data2vec_vision": (
        "Data2VecVisionConfig", "Data2VecVisionModel", _VIT | {"use_relative_position_bias": True},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "levit": (
        "LevitConfig", "LevitModel",
        {"hidden_sizes": [32, 48, 64], "num_attention_heads": [1, 2, 2], "depths": [1, 1, 1],
         "key_dim": [16, 16, 16]},
        "pixel_values", "pooler_output", _IMG,
    ),
    "mobilevitv2": (
        "MobileViTV2Config", "MobileViTV2Model", {"width_multiplier": 0.5},
        "pixel_values", "pooler_output", (3, 256, 256),
    ),
    "pvt": (
        "PvtConfig", "PvtModel",
        {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1],
         "num_attention_heads": [1, 1, 2, 2]},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "dpt_depth": (
        "DPTConfig", "DPTForDepthEstimation",
        _VIT | {"num_hidden_layers": 4, "image_size": 224, "patch_size": 16,
                "backbone_out_indices": [0, 1, 2, 3], "neck_hidden_sizes": [16, 32, 64, 64],
                "fusion_hidden_size": 32, "head_in_index": -1},
        "pixel_values", "predicted_depth", _IMG,
    ),
    "siglip_vision": (
        "SiglipVisionConfig", "SiglipVisionModel", _VIT | {"image_size": 224, "patch_size": 16},
        "pixel_values", "pooler_output", _IMG,
    ),
    "vitmae": (
        "ViTMAEConfig", "ViTMAEModel", _VIT | {"mask_ratio": 0.75},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "swinv2": (
        "Swinv2Config", "Swinv2Model",
        {"image_size": 224, "patch_size": 4, "embed_dim": 16, "depths": [1, 1],
         "num_heads": [1, 2], "window_size": 7},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "focalnet": (
        "FocalNetConfig", "FocalNetModel",
        {"embed_dim": 16, "depths": [1, 1], "hidden_sizes": [16, 32], "focal_levels": [2, 2],
         "focal_windows": [3, 3]},
        "pixel_values", "pooler_output", _IMG,
    ),
    "hiera": (
        "HieraConfig", "HieraModel",
        {"embed_dim": 16, "depths": [1, 1, 1, 1], "num_heads": [1, 1, 2, 2]},
        "pixel_values", "pooler_output", _IMG,
    ),
    "bit": (
        "BitConfig", "BitModel",
        {"embedding_size": 32, "hidden_sizes": [32, 64, 128, 256], "num_groups": 8,
         "depths": [1, 1, 1, 1]},
        "pixel_values", "pooler_output", _IMG,
    ),
    "cvt": (
        "CvtConfig", "CvtModel",
        {"embed_dim": [16, 32, 64], "depth": [1, 2, 3], "num_heads": [1, 2, 4],
         "drop_path_rate": [0.0, 0.0, 0.0]},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "dinov3_vit": (
        "DINOv3ViTConfig", "DINOv3ViTModel",
        _VIT | {"image_size": 224, "patch_size": 16, "num_register_tokens": 4},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "hubert": ("HubertConfig", "HubertModel", _W2V, "input_values", "last_hidden_state", _WAV),
    "wavlm": (
        "WavLMConfig", "WavLMModel", _W2V | {"num_buckets": 32, "max_bucket_distance": 64},
        "input_values", "last_hidden_state", _WAV,
    ),
    "sew": (
        "SEWConfig", "SEWModel", _W2V | {"squeeze_factor": 2},
        "input_values", "last_hidden_state", _WAV,
    ),
    "sew_d": (
        "SEWDConfig", "SEWDModel",
        _W2V | {"squeeze_factor": 2, "position_buckets": 32, "max_position_embeddings": 64},
        "input_values", "last_hidden_state", _WAV,
    ),
    "data2vec_audio": (
        "Data2VecAudioConfig", "Data2VecAudioModel",
        _W2V | {"num_conv_pos_embeddings": 5, "num_conv_pos_embedding_groups": 4},
        "input_values", "last_hidden_state", _WAV,
    ),
    "ast": (
        "ASTConfig", "ASTModel", _VIT | {"max_length": 128, "num_mel_bins": 32},
        "input_values", "pooler_output", (128, 32),
    ),
    "wav2vec2_conformer": (
        "Wav2Vec2ConformerConfig", "Wav2Vec2ConformerModel",
        _W2V | {"position_embeddings_type": "rotary", "conv_depthwise_kernel_size": 7},
        "input_values", "last_hidden_state", _WAV,
    ),
}  # fmt: skip
TIMM_THIRD = [
    "resnest14d", "tnt_s_patch16_224", "coatnet_nano_rw_224", "hiera_tiny_224", "davit_tiny",
    "volo_d1_224", "deit3_small_patch16_224", "vit_relpos_small_patch16_224", "lambda_resnet26t",
    "ecaresnet26t", "seresnext26d_32x4d", "mixnet_s", "gmlp_s16_224", "nest_tiny",
    "efficientformerv2_s0", "vit_small_patch16_rope_224", "mvitv2_tiny",
]  # fmt: skip
TORCHVISION_THIRD = ["densenet169", "resnet152"]
# torchvision models torchvision_problem cannot write. Video: name -> (frames, resolution).
TORCHVISION_VIDEO_THIRD: dict[str, tuple[int, int]] = {
    "r3d_18": (8, 112), "mc3_18": (8, 112), "r2plus1d_18": (8, 112), "s3d": (16, 224),
    "swin3d_t": (8, 112), "mvit_v2_s": (16, 224),
}  # fmt: skip
TORCHVISION_SEGMENTATION_THIRD = [
    "fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large",
]  # fmt: skip
TORCHVISION_FLOW_THIRD = ["raft_small"]


def _torchvision_source(name: str, build: str, args: str, shape: tuple[int, ...], call: str) -> str:
    """A torchvision model that is not an image classifier: one input of `shape` per argument,
    batch 1 at either size."""
    n = len(args.split(","))
    return f'''"""torchvision {name}, random weights."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, size, dtype):
        super().__init__()
        import torchvision

        torch.manual_seed(0)
        self.net = torchvision.models.{build}
        self.to(getattr(torch, dtype)).eval()

    def forward(self, {args}):
        return {call}


def get_inputs():
    c = _common()
    return [torch.randn(*{shape!r}, dtype=c.dtype()) for _ in range({n})]
'''


# A fourth set (`--set fourth`), written in session 14 (2026-12-07) after the first three had
# been worked on: decoders of 2025's releases (Llama 4's text model, DeepSeek-V2's latent
# attention, Qwen3-Next, hybrid and differential attention, more mixtures of experts), classic
# encoders and encoder-decoders, and image and audio models none of the sets held.
HF_FOURTH: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "apertus": ("ApertusConfig", "ApertusForCausalLM", {"head_dim": 16}, "logits"),
    "arcee": ("ArceeConfig", "ArceeForCausalLM", {"head_dim": 16}, "logits"),
    "bitnet": ("BitNetConfig", "BitNetForCausalLM", {}, "logits"),
    "diffllama": ("DiffLlamaConfig", "DiffLlamaForCausalLM", {}, "logits"),
    "ernie4_5": ("Ernie4_5Config", "Ernie4_5ForCausalLM", {"head_dim": 16}, "logits"),
    "helium2": ("HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM", {"head_dim": 16}, "logits"),
    "ministral": ("MinistralConfig", "MinistralForCausalLM", {"head_dim": 16}, "logits"),
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", {"sliding_window": 8}, "logits"),
    "seed_oss": ("SeedOssConfig", "SeedOssForCausalLM", {"head_dim": 16}, "logits"),
    "vaultgemma": ("VaultGemmaConfig", "VaultGemmaForCausalLM", {"head_dim": 16}, "logits"),
    "llama4_text": (
        "Llama4TextConfig", "Llama4ForCausalLM",
        {"head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 1,
         "intermediate_size_mlp": 128, "interleave_moe_layer_step": 2, "no_rope_layers": [1, 0],
         "attention_chunk_size": 8}, "logits",
    ),
    "deepseek_v2": (
        "DeepseekV2Config", "DeepseekV2ForCausalLM",
        {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
         "first_k_dense_replace": 1, "kv_lora_rank": 16, "q_lora_rank": None,
         "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "n_shared_experts": 1,
         "n_group": 1, "topk_group": 1, "num_key_value_heads": 4}, "logits",
    ),
    "jetmoe": (
        "JetMoeConfig", "JetMoeForCausalLM",
        {"num_local_experts": 4, "num_experts_per_tok": 2, "kv_channels": 16}, "logits",
    ),
    "dbrx": (
        "DbrxConfig", "DbrxForCausalLM",
        {"d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": 1024,
         "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
         "ffn_config": {"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2}},
        "logits",
    ),
    "granitemoeshared": (
        "GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM",
        {"num_local_experts": 4, "num_experts_per_tok": 2, "shared_intermediate_size": 64},
        "logits",
    ),
    "qwen3_next": (
        "Qwen3NextConfig", "Qwen3NextForCausalLM",
        {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
         "shared_expert_intermediate_size": 32, "linear_num_value_heads": 4,
         "linear_num_key_heads": 2, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
         "layer_types": ["linear_attention", "full_attention"]}, "logits",
    ),
    "falcon_h1": (
        "FalconH1Config", "FalconH1ForCausalLM",
        {"head_dim": 16, "mamba_d_ssm": 64, "mamba_n_heads": 4, "mamba_d_head": 16,
         "mamba_d_state": 8, "mamba_n_groups": 1, "mamba_chunk_size": 16}, "logits",
    ),
    "openai_gpt": (
        "OpenAIGPTConfig", "OpenAIGPTModel",
        {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 1024}, "last_hidden_state",
    ),
    "megatron_bert": ("MegatronBertConfig", "MegatronBertModel", {}, "last_hidden_state"),
    "rembert": (
        "RemBertConfig", "RemBertModel",
        {"input_embedding_size": 32, "output_embedding_size": 32}, "last_hidden_state",
    ),
    "convbert": ("ConvBertConfig", "ConvBertModel", {"embedding_size": 64}, "last_hidden_state"),
    "nomic_bert": ("NomicBertConfig", "NomicBertModel", {}, "last_hidden_state"),
    "eurobert": (
        "EuroBertConfig", "EuroBertModel",
        {"head_dim": 16, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
         "mask_token_id": 3}, "last_hidden_state",
    ),
    "roberta_prelayernorm": (
        "RobertaPreLayerNormConfig", "RobertaPreLayerNormModel", {"pad_token_id": 1},
        "last_hidden_state",
    ),
    "xlm": (
        "XLMConfig", "XLMModel", {"emb_dim": 64, "n_layers": 2, "n_heads": 4},
        "last_hidden_state",
    ),
    "mbart": (
        "MBartConfig", "MBartModel",
        {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128},
        "last_hidden_state",
    ),
    "m2m100": (
        "M2M100Config", "M2M100Model",
        {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128},
        "last_hidden_state",
    ),
    "blenderbot": (
        "BlenderbotConfig", "BlenderbotModel",
        {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128},
        "last_hidden_state",
    ),
    "umt5": (
        "UMT5Config", "UMT5Model",
        {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4},
        "last_hidden_state",
    ),
}  # fmt: skip
SEQ2SEQ_FOURTH = ("MBartModel", "M2M100Model", "BlenderbotModel", "UMT5Model")
HF_MEDIA_FOURTH: dict[str, tuple[str, str, dict[str, Any], str, str, tuple[int, ...]]] = {
    "mobilenet_v2": (
        "MobileNetV2Config", "MobileNetV2Model", {"depth_multiplier": 0.35},
        "pixel_values", "pooler_output", _IMG,
    ),
    "mobilenet_v1": (
        "MobileNetV1Config", "MobileNetV1Model", {"depth_multiplier": 0.25},
        "pixel_values", "pooler_output", _IMG,
    ),
    "swiftformer": (
        "SwiftFormerConfig", "SwiftFormerModel",
        {"depths": [1, 1, 1, 1], "embed_dims": [16, 32, 48, 64]},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "pvt_v2": (
        "PvtV2Config", "PvtV2Model",
        {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1],
         "num_attention_heads": [1, 1, 2, 2]},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "yolos": (
        "YolosConfig", "YolosModel", _VIT | {"image_size": [224, 224], "num_detection_tokens": 10},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "ijepa": ("IJepaConfig", "IJepaModel", _VIT | {"image_size": 224, "patch_size": 16},
              "pixel_values", "last_hidden_state", _IMG),
    "dinov2_registers": (
        "Dinov2WithRegistersConfig", "Dinov2WithRegistersModel",
        _VIT | {"image_size": 224, "patch_size": 14, "num_register_tokens": 4},
        "pixel_values", "last_hidden_state", _IMG,
    ),
    "dinov3_convnext": (
        "DINOv3ConvNextConfig", "DINOv3ConvNextModel",
        {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1]},
        "pixel_values", "pooler_output", _IMG,
    ),
    "glpn": (
        "GLPNConfig", "GLPNForDepthEstimation",
        {"num_encoder_blocks": 2, "depths": [1, 1], "sr_ratios": [2, 1], "hidden_sizes": [16, 32],
         "num_attention_heads": [1, 2], "strides": [4, 2], "patch_sizes": [7, 3],
         "decoder_hidden_size": 16},
        "pixel_values", "predicted_depth", (3, 128, 128),
    ),
    "unispeech_sat": (
        "UniSpeechSatConfig", "UniSpeechSatModel", _W2V,
        "input_values", "last_hidden_state", _WAV,
    ),
    "wav2vec2_bert": (
        "Wav2Vec2BertConfig", "Wav2Vec2BertModel",
        _VIT | {"feature_projection_input_dim": 80, "conv_depthwise_kernel_size": 7},
        "input_features", "last_hidden_state", (100, 80),
    ),
    "speech2text_encoder": (
        "Speech2TextConfig", "Speech2TextModel.get_encoder",
        {"d_model": 64, "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 128,
         "decoder_attention_heads": 4, "decoder_ffn_dim": 128, "input_feat_per_channel": 80,
         "conv_channels": 64, "max_source_positions": 200},
        "input_features", "last_hidden_state", (200, 80),
    ),
    "moonshine_encoder": (
        "MoonshineConfig", "MoonshineModel.get_encoder",
        {"hidden_size": 64, "intermediate_size": 128, "encoder_num_hidden_layers": 2,
         "decoder_num_hidden_layers": 2, "encoder_num_attention_heads": 4,
         "decoder_num_attention_heads": 4},
        "input_values", "last_hidden_state", _WAV,
    ),
}  # fmt: skip
TIMM_FOURTH = [
    "convnext_pico", "efficientnet_b1", "mobilenetv3_small_100", "regnety_016",
    "vit_tiny_patch16_224", "beit_base_patch16_224", "swinv2_cr_tiny_ns_224", "cspdarknet53",
    "resnet26d", "dm_nfnet_f0", "fastvit_sa12", "repghostnet_050", "mobilevit_s",
    "rdnet_tiny", "vitamin_small_224",
]  # fmt: skip
TORCHVISION_FOURTH = [
    "efficientnet_b1", "regnet_y_1_6gf", "convnext_base", "vit_l_32", "swin_b", "mnasnet0_75",
]  # fmt: skip


def torchvision_video_problem(name: str, frames: int, res: int) -> str:
    """A video classifier reads one 5-D clip (batch, channels, frames, height, width)."""
    shape = (1, 3, frames, res, res)
    return _torchvision_source(name, f"video.{name}(num_classes=10)", "x", shape, "self.net(x)")


def torchvision_segmentation_problem(name: str) -> str:
    """A segmentation model returns a dict: its "out". No backbone weights: nothing downloads."""
    build = f"segmentation.{name}(num_classes=10, weights_backbone=None)"
    return _torchvision_source(name, build, "x", (1, 3, 224, 224), 'self.net(x)["out"]')


def torchvision_flow_problem(name: str) -> str:
    """Optical flow reads two images and returns every refinement's flow: the last, after 4."""
    call = "self.net(x, y, num_flow_updates=4)[-1]"
    return _torchvision_source(name, f"optical_flow.{name}()", "x, y", (1, 3, 128, 128), call)


def problems(which: str = "first") -> dict[str, str]:
    """File name -> source, for every entry of one set (`first`, `more` or `third`)."""
    hf, media, timm_, tv = {
        "first": (HF, HF_MEDIA, TIMM, TORCHVISION),
        "more": (HF_MORE, HF_MEDIA_MORE, TIMM_MORE, TORCHVISION_MORE),
        "third": (HF_THIRD, HF_MEDIA_THIRD, TIMM_THIRD, TORCHVISION_THIRD),
        "fourth": (HF_FOURTH, HF_MEDIA_FOURTH, TIMM_FOURTH, TORCHVISION_FOURTH),
    }[which]
    out = {f"hf_{k}.py": hf_problem(*v) for k, v in hf.items()}
    out |= {f"hf_{k}.py": hf_media_problem(*v) for k, v in media.items()}
    out |= {f"timm_{n}.py": timm_problem(n) for n in timm_}
    out |= {f"tv_{n}.py": torchvision_problem(n) for n in tv}
    if which == "third":
        video = TORCHVISION_VIDEO_THIRD.items()
        out |= {f"tv_{k}.py": torchvision_video_problem(k, *v) for k, v in video}
        segmentation = TORCHVISION_SEGMENTATION_THIRD
        out |= {f"tv_{n}.py": torchvision_segmentation_problem(n) for n in segmentation}
        out |= {f"tv_{n}.py": torchvision_flow_problem(n) for n in TORCHVISION_FLOW_THIRD}
    return {k: v + TAIL.format(common=str(COMMON)) for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the problem files are written")
    parser.add_argument(
        "--set", choices=("first", "more", "third", "fourth"), default="first",
        help="the zoo's first 87 models, the 65 written after them (`more`), the 75 after "
        "those (`third`), or the 63 of session 14 (`fourth`)",
    )  # fmt: skip
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    made = problems(args.set)
    for name, source in made.items():
        (args.folder / name).write_text(source)
    print(f"wrote {len(made)} problems to {args.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
