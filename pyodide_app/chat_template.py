"""ChatML prompt rendering (the template family of SmolLM2), standard library only.

    <|im_start|>{role}\\n{content}<|im_end|>\\n   per message
    <|im_start|>assistant\\n                      when a reply is wanted
    <|im_start|>assistant\\n{content}               when the last (assistant) message is continued

When the first message is not a system message, the template's default
system message comes first. The package keeps the original Jinja template;
`ChatTemplate.from_jinja` accepts it only if it has this shape, and takes the
default system prompt from it, so a model with a different template is
refused instead of being prompted wrongly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ROLES = ("system", "user", "assistant")
_DEFAULT_SYSTEM = re.compile(r"<\|im_start\|>system(?:\n|\\n)(.*?)<\|im_end\|>", re.DOTALL)
_REQUIRED_PARTS = ("<|im_start|>", "message['role']", "message['content']", "<|im_end|>", "add_generation_prompt")


class TemplateError(ValueError):
    pass


@dataclass(frozen=True)
class ChatTemplate:
    default_system: str | None  # inserted when the first message is not a system message

    @classmethod
    def from_jinja(cls, source: str) -> "ChatTemplate":
        missing = [part for part in _REQUIRED_PARTS if part not in source]
        if missing:
            raise TemplateError(f"unsupported chat template (not ChatML; missing {missing[0]!r})")
        match = _DEFAULT_SYSTEM.search(source)
        return cls(match.group(1) if match else None)

    def render(
        self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True, continue_final: bool = False
    ) -> str:
        """continue_final: the last message is an assistant answer left open (no end marker), so the model
        carries on writing it; there is then no generation prompt."""
        if continue_final and (not messages or messages[-1].get("role") != "assistant"):
            raise TemplateError("only an assistant message can be continued: the last message must be one")
        parts = []
        for index, message in enumerate(messages):
            role, content = message.get("role"), message.get("content")
            if role not in ROLES:
                raise TemplateError(f"message {index}: role must be one of {ROLES}, got {role!r}")
            if not isinstance(content, str):
                raise TemplateError(f"message {index}: content must be a string")
            if index == 0 and role != "system" and self.default_system is not None:
                parts.append(f"{IM_START}system\n{self.default_system}{IM_END}\n")
            parts.append(f"{IM_START}{role}\n{content}{IM_END}\n")
        if continue_final:
            parts[-1] = parts[-1].removesuffix(f"{IM_END}\n")
        elif add_generation_prompt:
            parts.append(f"{IM_START}assistant\n")
        return "".join(parts)
