#!/usr/bin/env python3
"""Prints the loss graph of a Llama 2 shape (bf16) with fewer layers.

llama-shape.py 7B|70B LAYERS BATCH SEQ"""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "python_frontend"))
from par import models  # noqa: E402

size, layers, batch, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
config = dataclasses.replace(models.LLAMA_CONFIGS[size], max_seq=seq, dtype="bf16",
                             n_layers=layers)
print(models.loss_graph(models.Llama(config), batch, seq, name="llama").to_mlir())
