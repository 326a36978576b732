"""Readers of the measurements an operator already has, for `gclc calibrate`: nccl-tests
output, Megatron-LM, torchtitan and NeMo training logs, vLLM and SGLang `bench serve`
results, genai-perf and aiperf exports, and the kernel CSV `gclc probe` writes. Each reader
turns a file into frozen records (`records.py`) that keep the line they came from, or
into located errors (file:line:col, what is wrong, how to fix it)."""
