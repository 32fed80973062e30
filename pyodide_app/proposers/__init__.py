"""Draft sources. Each returns tokens plus the exact q rows that produced them."""

from .base import EMPTY_PROPOSAL, NoProposer, Proposal, Proposer
from .hybrid import HybridProposer
from .model_draft import ModelDraft
from .neural import DraftRuntime, NeuralProposer
from .prompt_lookup import PromptLookup

__all__ = [
    "EMPTY_PROPOSAL",
    "DraftRuntime",
    "HybridProposer",
    "ModelDraft",
    "NeuralProposer",
    "NoProposer",
    "Proposal",
    "Proposer",
    "PromptLookup",
]
