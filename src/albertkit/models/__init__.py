"""ALBERT in Keras 3 (albert.py), size presets (sizes.py), Hugging Face import/export (hf.py)."""
