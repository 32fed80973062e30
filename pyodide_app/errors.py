"""Named failures. Each carries a stable `code` that receipts and the UI report."""

from __future__ import annotations


class SpecChatError(Exception):
    """Base class; `code` is stable across versions."""

    code = "ERROR"


class InvalidSettings(SpecChatError, ValueError):
    """A request setting is out of range; raised before any work is done."""

    code = "INVALID_SETTINGS"


class PromptTooLong(InvalidSettings):
    code = "PROMPT_TOO_LONG"


class TargetNumericError(SpecChatError):
    """A processed champion row has NaN or no valid token (FATAL_TARGET_NUMERIC_OR_MASK_ERROR)."""

    code = "TARGET_NUMERIC"


class ResidualMassError(SpecChatError):
    """The residual [p - q]+ has no usable mass at a rejection (FATAL_RESIDUAL_INVARIANT_ERROR)."""

    code = "RESIDUAL_MASS"


class DraftNumericError(SpecChatError):
    """The draft's q row is unusable (NaN, no mass, or q(y) = 0 for its own token)."""

    code = "DRAFT_NUMERIC"


class DraftRuntimeError(SpecChatError):
    """The draft model's runtime failed (onnxruntime error, lost worker)."""

    code = "DRAFT_RUNTIME"


class GPUUnsupported(SpecChatError):
    """The WebGPU adapter is below what the champion needs (limits, workgroup memory); the CPU path can run."""

    code = "GPU_UNSUPPORTED"


class DeviceError(SpecChatError):
    """The GPU failed (device lost, out of memory, validation error)."""

    code = "DEVICE"


class VerifyResultError(SpecChatError):
    """The champion's decision is outside its contract (accepted > k, token out of vocabulary)."""

    code = "VERIFY_RESULT"


class StalePublication(SpecChatError):
    """A staged round does not extend the currently published state."""

    code = "STALE_PUBLICATION"


class Cancelled(SpecChatError):
    code = "CANCELLED"
