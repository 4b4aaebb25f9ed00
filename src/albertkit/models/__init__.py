"""ALBERT in Keras 3 (albert.py; its kernels, layers, precision plumbing and options beside it),
the memory footprint estimate (footprint.py), Hugging Face import/export (hf.py)."""
