#!/usr/bin/env python3
"""Writes the real exporter graphs tests/dynamic checks drkc --dynamic on (run where torch and
transformers are installed; the .onnx files are committed, CI has no torch):

  bert, distilbert, roberta, gpt2, llama: transformers models (2 layers, hidden 32, random
  weights from seed 0) exported by torch.onnx.export(dynamo=True) with `batch` and `seq`
  dynamic (torch.export.Dim; seq 2..64), taking input_ids and attention_mask and returning
  last_hidden_state (and BERT/RoBERTa's pooler output). Node metadata (the exporter's stack
  traces) is dropped and the weights are stored inside each file.

What they hold that generated graphs do not: transformers' mask code (GatherND by arange of
batch and seq, And, Where(mask, 0, -max)), GPT-2's Conv1D as Gemm over rows reshaped to
"batch*seq", K^T made by Reshape(batch*heads) -> Transpose -> Reshape, RoBERTa's positions
(CumSum of the mask), LLaMA's rotary cos/sin from positions and GQA repeats, BERT's pooler
reading token 0; bert_meanpool: sentence-transformers' masked mean pooling and L2 normalisation
over BERT (sum(h * mask) / clamp(sum(mask))); distilbert_mean: the plain mean over the tokens
(ReduceMean over seq). With --torchscript, the TorchScript exporter (dynamo=False, dynamic_axes,
opset 17) writes ts_NAME.onnx: its traced mask code flattens the mask to [batch*seq, 1] and
gathers it at positions(batch) x size(seq) + positions(seq), and its shapes go through
Shape/Gather/Concat/Equal/Where chains; its BLOOM (ts_bloom only) computes batch x heads as
`Gather(Shape) * heads` for its Reshapes and tiles the ALiBi slopes batch times. ts_wavlm (only
with --torchscript; batch dynamic, 1600 audio samples): WavLM's time-major attention, rows
[time, batch * heads] merged and split back. Usage: export.py OUTDIR [--torchscript] [NAME ...] (written with torch 2.15.0, transformers 5.24.0,
onnx 1.23.2).
"""
import os
import sys

import onnx
import torch
from transformers import (BertConfig, BertModel, BloomConfig, BloomModel, DistilBertConfig, DistilBertModel, GPT2Config,
                          GPT2Model, LlamaConfig, LlamaModel, RobertaConfig, RobertaModel, WavLMConfig, WavLMModel)


class Hidden(torch.nn.Module):
    """input_ids, attention_mask -> the model's outputs as a tuple (keyword arguments inside)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        o = self.m(input_ids=input_ids, attention_mask=attention_mask)
        return tuple(x for x in (o.last_hidden_state, getattr(o, "pooler_output", None)) if x is not None)


class MeanPooled(torch.nn.Module):
    """sentence-transformers' embedding: the mean of the real tokens' hidden states (the mask as
    weights), L2-normalised."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        h = self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        w = attention_mask.unsqueeze(-1).expand(h.size()).float()
        e = torch.sum(h * w, 1) / torch.clamp(w.sum(1), min=1e-9)
        return torch.nn.functional.normalize(e, p=2, dim=1)


class TokenMean(torch.nn.Module):
    """The plain mean over every token (padding included, as the model is given it)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.mean(dim=1)


def models():
    h = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    yield "bert", BertModel(BertConfig(hidden_size=32, max_position_embeddings=64, **h))
    yield "roberta", RobertaModel(RobertaConfig(hidden_size=32, max_position_embeddings=70, **h))
    yield "distilbert", DistilBertModel(DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=100,
                                                         max_position_embeddings=64))
    yield "gpt2", GPT2Model(GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64, use_cache=False))
    yield "bert_meanpool", MeanPooled(BertModel(BertConfig(hidden_size=32, max_position_embeddings=64, **h)))
    yield "distilbert_mean", TokenMean(DistilBertModel(DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                                                        vocab_size=100, max_position_embeddings=64)))
    yield "llama", LlamaModel(LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                          intermediate_size=64, vocab_size=100, max_position_embeddings=64,
                                          use_cache=False))
    yield "bloom", BloomModel(BloomConfig(hidden_size=32, n_layer=2, n_head=2, vocab_size=100, use_cache=False))


class Audio(torch.nn.Module):
    """input_values -> last_hidden_state."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_values):
        return self.m(input_values=input_values).last_hidden_state


def export_wavlm(out):
    torch.manual_seed(0)
    m = Audio(WavLMModel(WavLMConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                     conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                                     num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
                                     num_buckets=32))).eval()
    path = os.path.join(out, "ts_wavlm.onnx")
    torch.onnx.export(m, (torch.randn(2, 1600),), path, dynamo=False, input_names=["input_values"],
                      dynamic_axes={"input_values": {0: "batch"}}, opset_version=17)
    return path


def main():
    args = [a for a in sys.argv[1:] if a != "--torchscript"]
    ts = "--torchscript" in sys.argv[1:]
    out = args[0]
    os.makedirs(out, exist_ok=True)
    todo = []
    for name, m in models():
        if args[1:] and name not in args[1:]:
            continue
        if name == "bloom" and not ts:
            continue
        todo.append((name, m))
    if ts and (not args[1:] or "wavlm" in args[1:]):
        todo.append(("wavlm", None))
    for name, m in todo:
        if name == "wavlm":
            path = export_wavlm(out)
            model = onnx.load(path)
            tidy(model, path)
            continue
        torch.manual_seed(0)
        m = (m if isinstance(m, (MeanPooled, TokenMean)) else Hidden(m)).eval()
        ids = torch.randint(0, 100, (2, 16))
        mask = torch.ones(2, 16, dtype=torch.long)
        B = torch.export.Dim("batch", min=1, max=64)
        S = torch.export.Dim("seq", min=2, max=64)
        path = os.path.join(out, f"ts_{name}.onnx" if ts else f"{name}.onnx")
        if ts:  # the TorchScript exporter with dynamic_axes, as most published ONNX models were made
            torch.onnx.export(m, (ids, mask), path, dynamo=False, input_names=["input_ids", "attention_mask"],
                              dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
                              opset_version=17)
            model = onnx.load(path)
        else:
            prog = torch.onnx.export(m, (ids, mask), dynamo=True, input_names=["input_ids", "attention_mask"],
                                     dynamic_shapes={"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}})
            model = prog.model_proto
        tidy(model, path)
    return 0


def tidy(model, path):
    """Drops node metadata (the exporter's stack traces) and value_info, saves with the weights inside."""
    for n in model.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    del model.metadata_props[:]
    del model.graph.value_info[:]
    onnx.save(model, path)
    print(f"{os.path.basename(path)}: {len(model.graph.node)} nodes, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    sys.exit(main())
