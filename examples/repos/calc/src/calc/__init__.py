"""A tiny arithmetic calculator: a tokenizer and a recursive-descent evaluator."""

from .evaluator import CalcError, Parser, evaluate, try_evaluate
from .tokenizer import Token, tokenize

__all__ = ["CalcError", "Parser", "Token", "evaluate", "tokenize", "try_evaluate"]
