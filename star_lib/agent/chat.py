r"""Incremental tokenisation of a multi-turn conversation through the model's chat template.

The trace of one episode is ``prompt_ids`` (system + user + generation prompt) followed by
``completion_ids``: assistant segments (the turn's text and its end-of-turn token, ``env_mask`` 1) and
environment segments (the template glue, the tool response and the next generation prompt, ``env_mask`` 0).
Every environment segment begins right after a special token and ends on the generation prompt, and the
recorded assistant text is stripped of surrounding whitespace, so tokenising segment by segment gives the
same ids as tokenising the whole rendered conversation:

    prompt_ids + completion_ids == tokenize(apply_chat_template(messages, tools=…))   # minus the final "\n"

(the template's newline after the last end-of-turn token is left out: TRL treats a completion that does
not end in EOS as truncated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from star_lib.agent.policies import Generation


class ChatRenderer:
    """Render and tokenise conversations with one tokenizer, chat template and tool list.

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template.
        tools: OpenAI-style tool schemas passed to the template as ``tools=``.

    Raises:
        ValueError: When the template does not close an assistant turn with a special token.

    """

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "the tokenizer has no chat_template; set tokenizer.chat_template (e.g. Qwen2.5's)"
            )
        self.tokenizer = tokenizer
        self.tools = tools or None
        self.eot_text = self._detect_end_of_turn()
        self.eot_id = tokenizer.convert_tokens_to_ids(self.eot_text)

    def render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool) -> str:
        """Render messages to text with the chat template."""
        return self.tokenizer.apply_chat_template(
            messages, tools=self.tools, add_generation_prompt=add_generation_prompt, tokenize=False
        )

    def encode(self, text: str) -> list[int]:
        """Tokenise text without adding special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []

    def _detect_end_of_turn(self) -> str:
        probe = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "PROBE"}]
        text = self.render(probe, add_generation_prompt=False)
        tail = text[text.rindex("PROBE") + len("PROBE") :]
        specials = sorted(self.tokenizer.get_added_vocab(), key=len, reverse=True)
        for token in specials:
            if tail.startswith(token):
                return token
        raise ValueError(
            "the chat template must end an assistant turn with a special token right after its text "
            f"(found {tail[:20]!r}); use a ChatML-style template such as Qwen2.5's"
        )


@dataclass
class TokenTrace:
    """The token record of one episode, built turn by turn."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    """1 on assistant tokens (incl. their end-of-turn token when sampled), 0 on environment/template tokens
    and on the end-of-turn token closing a turn cut at ``max_new_tokens``."""
    logprobs: list[float] | None = field(default_factory=list)
    """Sampling log-probabilities (NaN where a turn was re-tokenised, 0.0 on environment tokens); None when
    the backend gave none."""
    rendered: str = ""
    """The rendered conversation so far (ends with the generation prompt while the episode runs)."""
    retokenized_turns: int = 0
    """Assistant turns whose canonical ids differ from the sampled ids."""

    @property
    def length(self) -> int:
        """Tokens in the context so far."""
        return len(self.prompt_ids) + len(self.completion_ids)

    @property
    def context_ids(self) -> list[int]:
        """The ids a model continues from."""
        return self.prompt_ids + self.completion_ids

    def start(self, renderer: ChatRenderer, messages: list[dict[str, Any]]) -> None:
        """Record the prompt: the first messages plus the generation prompt."""
        self.rendered = renderer.render(messages, add_generation_prompt=True)
        self.prompt_ids = renderer.encode(self.rendered)

    def add_assistant(
        self,
        renderer: ChatRenderer,
        messages: list[dict[str, Any]],
        generation: Generation,
        mode: Literal["canonical", "sampled"] = "canonical",
    ) -> None:
        """Append the last assistant message (``messages[-1]``) and its end-of-turn token.

        A turn cut at ``max_new_tokens`` (``generation.finish_reason == "length"``) never sampled its
        end-of-turn token: the token is still recorded (the template closes every turn) but with
        ``env_mask`` 0, so the loss does not train a token the model did not write.

        Args:
            renderer: The renderer of this episode.
            messages: The conversation ending with the assistant message just produced.
            generation: The policy output behind that message (for sampled ids and logprobs).
            mode: ``canonical`` re-tokenises the recorded text (exact round trip; a turn whose sampled ids
                differ gets NaN logprobs, which TRL leaves out of its importance-sampling correction);
                ``sampled`` keeps the model's own ids (exact logprobs).

        """
        content = messages[-1]["content"]
        full = renderer.render(messages, add_generation_prompt=False)
        segment = content + renderer.eot_text
        if not full.startswith(self.rendered + segment):
            raise ValueError(
                "the chat template re-renders earlier turns differently (not prefix-preserving); "
                "use a template that renders assistant text verbatim, such as Qwen2.5's"
            )
        canonical = renderer.encode(segment)
        sampled = list(generation.token_ids or [])
        if sampled and sampled[-1] != renderer.eot_id:
            sampled = [*sampled, renderer.eot_id]
        ids = sampled if (mode == "sampled" and generation.token_ids) else canonical
        self.completion_ids += ids
        mask = [1] * len(ids)
        if generation.finish_reason == "length" and ids and ids[-1] == renderer.eot_id:
            mask[-1] = 0  # appended by us, not sampled: keep it out of the loss
        self.env_mask += mask
        self.rendered += segment
        self._add_logprobs(ids, sampled, generation.logprobs)
        if mask[-1] == 0 and self.logprobs:
            self.logprobs[-1] = 0.0  # like every token outside the loss (TRL's convention for env tokens)

    def _add_logprobs(self, ids: list[int], sampled: list[int], logprobs: list[float] | None) -> None:
        if self.logprobs is None:
            return
        if logprobs is None:
            self.logprobs = None
            return
        if ids == sampled:
            values = list(logprobs) + [math.nan] * (len(ids) - len(logprobs))
        else:
            self.retokenized_turns += 1
            values = [math.nan] * len(ids)
        self.logprobs += values[: len(ids)]

    def env_segment(self, renderer: ChatRenderer, messages: list[dict[str, Any]]) -> tuple[str, list[int]]:
        """Render and tokenise what the environment adds after the last assistant turn (not yet recorded)."""
        full = renderer.render(messages, add_generation_prompt=True)
        if not full.startswith(self.rendered):
            raise ValueError("the chat template re-renders earlier turns differently (not prefix-preserving)")
        text = full[len(self.rendered) :]
        return text, renderer.encode(text)

    def add_env(self, text: str, ids: list[int]) -> None:
        """Record an environment segment from :meth:`env_segment`."""
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        if self.logprobs is not None:
            self.logprobs += [0.0] * len(ids)
        self.rendered += text
