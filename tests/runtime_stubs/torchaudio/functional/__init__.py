"""Test-only stand-in for torchaudio.functional: importable, unusable (see ../../README.md)."""

from .._unavailable import attribute_getter

__getattr__ = attribute_getter(__name__)
